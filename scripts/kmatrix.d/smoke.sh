#!/bin/sh
# gebpf kernel-matrix smoke suite: runs the gebpf commands and records what
# they did; it judges nothing (scripts/kmatrix.d/judge.py does, on the host,
# from these files).  Runs the same way inside the QEMU guest (busybox sh,
# started by the initramfs /init) and on the host (scripts/kmatrix).
#
#   smoke.sh GEBPF KMPROGS OUTDIR
#
# KMPROGS holds the smoke programs and km.env (their symbol addresses, written
# by scripts/kmatrix from nm).  For each check NAME it leaves in OUTDIR:
# NAME.rc (exit status), NAME.err (stderr), and the check's output files.
# Keep it small: ptrace single-step runs at ~4.5k steps/s under TCG.
set -u

G=$1
P=$2
O=$3
. "$P/km.env"
mkdir -p "$O"
# With KM_CHANNEL set (the guest's /dev/ttyS1), every result file is sent
# there as soon as its check has ended, so a guest that dies later still
# reports what ran.  Framing, one file at a time (judge.py decodes it):
#   @@KM-FILE NAME SHA256 gz / base64 lines of the gzipped file / @@KM-END NAME;
#   "@@KM-DONE" at the end (SHA256: the file's own bytes).  Gzipped: the
#   emulated UART moved ~100 KB/s, and the 13 MB of a guest's base64 (traces
#   of a few MB) were most of its two minutes; JSONL shrinks ~19x.
sent=" "
flush() {
	[ -n "${KM_CHANNEL:-}" ] || return 0
	for f in "$O"/*; do
		n=${f##*/}
		case "$sent" in *" $n "*) continue ;; esac
		[ -f "$f" ] && [ "$n" != snap.core ] && [ "$n" != mt.core ] && [ "$n" != snap_attach.core ] &&
			[ "$n" != stopped.core ] || continue
		{
			echo "@@KM-FILE $n $(sha256sum <"$f" | cut -d' ' -f1) gz"
			gzip -c <"$f" | base64
			echo "@@KM-END $n"
		} >>"$KM_CHANNEL"
		sent="$sent$n "
	done
}

# run NAME SECONDS CMD...: stdout to NAME.out, stderr to NAME.err, status to
# NAME.rc; a command still running after SECONDS gets SIGTERM (NAME.timeout).
# The timeouts add up to less than scripts/kmatrix's guest timeout.
run() {
	name=$1
	secs=$2
	shift 2
	echo "kmatrix: $name: $*" >&2
	t0=$(date +%s)
	timeout "$secs" "$@" >"$O/$name.out" 2>"$O/$name.err"
	rc=$?
	echo $rc >"$O/$name.rc"
	took=$(($(date +%s) - t0))
	# (each check's seconds on the console: where a guest's time goes)
	echo "kmatrix: $name: exit $rc after $took s" >&2
	# gebpf handles SIGTERM (exit 1, summary written): say it was ours.
	[ "$took" -lt "$secs" ] || echo "$secs" >"$O/$name.timeout"
	flush
}

uname -r >"$O/kernel"
{
	[ -r /sys/kernel/btf/vmlinux ] && echo "btf=yes" || echo "btf=no"
	[ -d /sys/kernel/tracing/events ] || [ -d /sys/kernel/debug/tracing/events ] &&
		echo "tracefs=yes" || echo "tracefs=no"
	# rdfsbase for the patch trap's owner check: a hypervisor may hide it
	grep -qw fsgsbase /proc/cpuinfo && echo "fsgsbase=yes" || echo "fsgsbase=no"
	# bpftool for the cut of the kernel's BTF (docs/trace.md "Start-up cost")
	command -v bpftool >/dev/null && echo "bpftool=yes" || echo "bpftool=no"
} >"$O/features"
flush

# (1) exact trace of a range (expect/kmtrace.jsonl), entered through the probe
# trap (uprobes + BPF: the range's start and the return site of its inner
# call) and through the page trap (injected mprotect); and run by the
# translating engine (a code cache made by injected mmap/mprotect, shared
# through /proc/PID/map_files, left through PTRACE_SYSCALL stops)
run trace 30 "$G" trace -v --trap probes --range "$WORK_START-$WORK_LAST" -o "$O/trace.jsonl" -- "$P/kmtrace"
run trace_pages 30 "$G" trace --trap pages --range "$WORK_START-$WORK_LAST" -o "$O/trace_pages.jsonl" -- "$P/kmtrace"
# ... with --values (the step engine: every access's value read through
# /proc/PID/mem or process_vm_readv, the registers each instruction wrote
# through PTRACE_GETREGS and the XSAVE regset; issue 35), entered through
# the probe trap (kmtrace's two entries give their values once they ran:
# the file before the first from the BPF program's registers) and through
# the page trap
run trace_values 30 "$G" trace -v --values --range "$WORK_START-$WORK_LAST" -o "$O/trace_values.jsonl" -- "$P/kmtrace"
run trace_values_pages 30 "$G" trace -v --values --trap pages --range "$WORK_START-$WORK_LAST" -o "$O/trace_values_pages.jsonl" -- "$P/kmtrace"
# ... and single-stepped (the step engine reads them with ptrace; the two
# above take them in the translating engine's code cache)
run trace_values_step 30 "$G" trace -v --values --engine step --range "$WORK_START-$WORK_LAST" -o "$O/trace_values_step.jsonl" -- "$P/kmtrace"
run trace_jit 30 "$G" trace -v --trap probes --engine jit --range "$WORK_START-$WORK_LAST" -o "$O/trace_jit.jsonl" -- "$P/kmtrace"
# ... and through the patch trap (issue 19: the range translated up front
# into a stop-free cache, its entries overwritten through /proc/PID/mem with
# jumps, the program under PTRACE_CONT, its ring drained while it runs; the
# cache's mmap/mprotect/munmap made from the vDSO-padding stub of (2))
run trace_patch 30 "$G" trace -v --trap patch --range "$WORK_START-$WORK_LAST" -o "$O/trace_patch.jsonl" -- "$P/kmtrace"
# ... written with O_DIRECT from the start where the guest's /tmp (tmpfs)
# takes it (Linux 6.6 on), else buffered (docs/trace-format.md "Writing"):
# 60000 instructions of kmbusy's spin loop (~3 MB) to a file gebpf opens,
# and the same through -o /dev/stdout (a descriptor it was given: buffered)
run trace_direct 30 env GEBPF_WRITE_DIRECT=1 "$G" trace -v --trap patch --range "$SPIN_START-$SPIN_LAST" --max-insns 60000 -o "$O/trace_direct.jsonl" -- "$P/kmbusy"
run trace_buffered 30 env GEBPF_WRITE_DIRECT=1 "$G" trace --trap patch --range "$SPIN_START-$SPIN_LAST" --max-insns 60000 -o /dev/stdout -- "$P/kmbusy"
# ... and across an exec: kmtrace's `work` named by file and symbol, exec'd by
# a shell (pending until then; at the exec event the patch trap is set up in
# the new image: PTRACE_EVENT_EXEC, PTRACE_SYSCALL stops at each mmap)
run trace_patch_exec 30 "$G" trace -v --trap patch --range "$P/kmtrace:work" -o "$O/trace_patch_exec.jsonl" -- /bin/sh -c "exec $P/kmtrace"
# ... with an entry on a uprobe inside the patch trap: the range ends at the
# return site of its inner call (a 1-byte pop), inside that entry's 5 bytes,
# so the planner refuses it and it keeps a uprobe (the probe trap's
# machinery); the call returns into it: a hit, the lock taken by gebpf, a
# one-instruction stretch.  Byte-identical to the probe trap on that range.
run trace_patch_probe 30 "$G" trace -v --trap patch --range "$WORK_START-$WORK_RET" -o "$O/trace_patch_probe.jsonl" -- "$P/kmtrace"
run trace_short 30 "$G" trace --trap probes --range "$WORK_START-$WORK_RET" -o "$O/trace_short.jsonl" -- "$P/kmtrace"
# ... and through the probe trap across an exec made by a second thread: the
# kernel filters a uprobe's hits by the memory of the task it was attached
# for, the main thread, which that exec kills; gebpf attaches the probes
# again (uprobe_multi links on 6.10+, perf-event uprobes before) for the
# exec'ing thread, which takes over the pid and keeps its vcpu (1)
run trace_exec_thread 30 "$G" trace -v --trap probes --range "$P/kmtrace:work" -o "$O/trace_exec_thread.jsonl" -- "$P/kmexecthr" "$P/kmtrace"
# ... and a SIGILL handler in the range stepping over a ud2: its return,
# through the restorer off the range, into the range's middle, followed to
# the frame's rt_sigreturn (PTRACE_SYSCALL's exit stop); the probe trap's
# trace is --trap none's
run trace_sighere 30 "$G" trace -v --trap probes --range "$SIGHERE_START-$SIGHERE_LAST" -o "$O/trace_sighere.jsonl" -- "$P/kmsighere"
run trace_sighere_ref 60 "$G" trace --trap none --range "$SIGHERE_START-$SIGHERE_LAST" -o "$O/trace_sighere_ref.jsonl" -- "$P/kmsighere"

# (1b) gebpf and its worker SIGKILLed together in the middle of a patch trap
# trace (a cgroup's OOM kill): the kernel marks the cache's liveness word as
# the worker dies (a robust mutex's FUTEX_OWNER_DIED, in the worker's exit,
# before its tracees are let go: docs/trace.md "Harmless without gebpf"), so
# kmalarm runs the original code through the entries left patched (its 1 ms
# SIGALRM too) and finishes ("kmalarm ok", killed.target); the next trace
# recognises the cache, writes the entries back from the file and traces
# (killed_retrace, 3 s: each SIGALRM stops kmalarm for gebpf, and under TCG
# with the other kernels booting a round trip took ~4 ms, so 1 s once saw no
# whole call of `work`; trap/patch/leftover.c: /proc/PID/pagemap, map_files)
rm -f "$O/.killed.fifo"
mkfifo "$O/.killed.fifo"
"$P/kmalarm" <"$O/.killed.fifo" >"$O/.killed.out" &
kp=$!
exec 9>"$O/.killed.fifo"
sleep 0.3
# (its own process group, the worker in it: one kill(2) of the group
# SIGKILLs both at once, as a cgroup's OOM kill does; two kills in a row
# let the one left write the entries back, and die before saying so)
setsid "$G" trace -v -p "$kp" --trap patch --range "$ALARM_START-$ALARM_LAST" --duration 60 \
	--max-events 20000 -o "$O/killed.jsonl" 2>"$O/killed.err" &
gp=$!
i=0
while [ $i -lt 200 ] && ! grep -q "entries patched" "$O/killed.err"; do
	sleep 0.1
	i=$((i + 1))
done
sleep 0.3
wp=
for d in /proc/[0-9]*; do
	[ "$(cut -d' ' -f4 "$d/stat" 2>/dev/null)" = "$gp" ] && wp="$wp ${d#/proc/}"
done
kill -9 -- -"$gp" 2>/dev/null
kill -9 $wp 2>/dev/null
wait "$gp"
echo $? >"$O/killed.rc"
echo "$wp" >"$O/killed.worker"
sleep 1
run killed_retrace 30 "$G" trace -v -p "$kp" --range "$ALARM_START-$ALARM_LAST" --duration 3 \
	--max-events 20000 -o "$O/killed_retrace.jsonl"
exec 9>&-
wait "$kp"
echo $? >"$O/killed.target"
rm -f "$O/.killed.fifo"
mv "$O/.killed.out" "$O/killed.target.out"
flush

# (2) snapshot at a PC, then read bytes back from it.  The bytes come from a
# copy-on-write copy (clone(CLONE_PARENT), exit signal 0, run from a stub in
# the vDSO's padding through PTRACE_SYSCALL stops, with PTRACE_GETSIGMASK and
# PTRACE_INTERRUPT at a syscall stop): -v says so.
rm -f "$O/snap.core"
run snap 30 "$G" snap -v --at "$AFTER_WORK" -o "$O/snap.core" -- "$P/kmtrace"
if [ -s "$O/snap.core" ]; then
	# The core is not shipped out of the guest: only its ELF header.
	head -c 64 "$O/snap.core" | od -An -v -tx1 >"$O/snap.head"
	run read 15 "$G" read "$O/snap.core" "$PAGE2" 16
	# (2b) resume it (injected mmap/prctl/dup3: kernel-dependent) and trace
	# the 4 instructions from after_work to exit(0)
	run resume 30 "$G" trace --from "$O/snap.core" -o "$O/resume.jsonl"
	rm -f "$O/snap.core"
fi
flush

# (2c) a two-thread process snapshotted with -p while both threads sleep
# (prctl PR_GET_TID_ADDRESS from the vDSO stub, get_robust_list, ...) and resumed:
# the second thread is cloned back with its clear_child_tid, so the first's
# FUTEX_WAIT on it ends and kmthreads prints "kmthreads ok" (resume_mt.out)
rm -f "$O/mt.core"
# kmthreads lives 6 s (a 1.8 s one had ended before a loaded host's guest
# attached: "no such process"); the snapshot waits for its second thread, not
# for a fixed delay, and the original is killed once snapped
"$P/kmthreads" >/dev/null &
kp=$!
i=0
while [ "$(ls /proc/$kp/task 2>/dev/null | wc -l)" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
run snap_mt 30 "$G" snap -p "$kp" -o "$O/mt.core"
kill -KILL "$kp" 2>/dev/null
wait "$kp" 2>/dev/null
[ -s "$O/mt.core" ] && run resume_mt 30 "$G" resume "$O/mt.core"
# ... and in a new pid namespace with its pid and both tids (clone3 set_tid,
# Linux 5.5; the init's wait handed back through gebpf's keeper)
[ -s "$O/mt.core" ] && run resume_mt_ns 30 "$G" resume --new-pidns "$O/mt.core"
rm -f "$O/mt.core"
flush

# (2c') the fds that are kernel objects (fdinfo's fields changed across
# kernels): resume_fds snapped at resume_here and resumed must print what
# its uninterrupted run prints (resume_fds_native.out)
if [ -x "$P/resume_fds" ]; then
	rm -f "$O/fds.core"
	run resume_fds_native 15 "$P/resume_fds"
	run snap_fds 30 "$G" snap --at resume_here -o "$O/fds.core" -- "$P/resume_fds"
	[ -s "$O/fds.core" ] && run resume_fds 30 "$G" resume "$O/fds.core"
	rm -f "$O/fds.core"
	flush
fi

# (2d) the same copy made from a thread of a running process blocked in
# nanosleep (first let restart it up to restart_syscall's entry, then the
# stub, whose way back restarts it again): kmsleep must
# then run to its end and exit 0 (snap_attach.target: its exit status)
"$P/kmsleep" &
kp=$!
sleep 0.2
run snap_attach 30 "$G" snap -v -p "$kp" -o "$O/snap_attach.core"
rm -f "$O/snap_attach.core"
wait "$kp"
echo $? >"$O/snap_attach.target"
flush

# (3) the same range with page faults (BPF tp_btf/page_fault_user)
run faults 30 "$G" trace --faults --range "$WORK_START-$WORK_LAST" -o "$O/faults.jsonl" -- "$P/kmtrace"

# (4) BPF sampling of a busy loop (kmbusy spins ~1.5 s of its CPU time,
# then exits), to its end
run sample 120 "$G" sample --range "$SPIN_START-$SPIN_LAST" -F 997 -o "$O/sample.jsonl" -- "$P/kmbusy"

# (5) the probe trap's kernel contract: uprobe + BPF stop after the probed
# instruction, steps over probes, SIGSTOP when SIGURG is blocked
# (probecheck sits beside gebpf; scripts/kmatrix.d/probecheck.c)
run probe 60 "${G%/*}/probecheck"
# ... and no uprobe on a VEX-encoded instruction: uprobes take the opcode
# byte after the prefix for a one-byte opcode (0x7f: jg) and emulate that
# instead of running it (docs/bpf.md "What a uprobe runs"); the probe trap
# leaves such an entry to the page trap, and the program's output is its
# native one (uprobe_vex exits 2 where the guest's CPU has no AVX2)
if [ -x "$P/uprobe_vex" ]; then
	run vex_native 10 "$P/uprobe_vex" 20
	run vex 30 "$G" trace -v --trap probes --range traced_vex -o "$O/vex.jsonl" -- "$P/uprobe_vex" 20
fi

# (6) call stacks: registers + user stack copy (DWARF mode), kernel stacks,
# children followed (raw_tp/sched_process_fork); a 6-deep chain without
# frame pointers for 1 s of CPU time, sampled to its end (a --duration of
# 20 s ended a guest starved beside the host's tests with 76 samples of
# its ~1000; the bound on a hang is the run's)
[ -x "$P/unwind_chain" ] &&
	run stacks 120 "$G" sample --folded --kernel -F 997 -o "$O/stacks.folded" -- "$P/unwind_chain" 1

# (7) detach from a thread single-stepped into a blocking nanosleep: kmsleep
# (3.6 s of 300 ms sleeps) must then run to its end and exit 0, not die of a
# SIGTRAP queued at its syscall's exit (detach.target: its exit status)
"$P/kmsleep" &
kp=$!
sleep 0.2
run detach 30 "$G" trace -p "$kp" --step-all --duration 0.5 -o "$O/detach.jsonl"
wait "$kp"
echo $? >"$O/detach.target"
flush

# (7b) a process stopped by job control (SIGSTOP in a sleep, its first one
# unless the guest is slow: state T; issue 32), attached as gdb attaches (PTRACE_SEIZE: its threads report
# group-stops, and a PTRACE_INTERRUPT comes back as one while it is
# stopped): snapped (the clone's stub run from that stop, -v), then traced
# for 0.5 s (the default trap set up, the threads left in their group-stop
# with PTRACE_LISTEN), each leaving it stopped (NAME.state, its state
# after); then traced until it exits, gebpf attached while it is stopped
# (stopped.state: its state just before the SIGCONT, t: in a ptrace stop,
# not running) and the SIGCONT sent once gebpf says it is stopped: the
# trace holds its restarted sleep and the rounds left (eleven after the first
# sleep: the snapshot's rbx, one fewer), and kmsleep exits 0
# (stopped.target).  gebpf's stderr and status are kept out of
# flush's sight (dot files) until it has ended.
state() { grep '^State:' "/proc/$1/status" | cut -f2 | cut -c1; }
"$P/kmsleep" &
kp=$!
# in a sleep (nanosleep: syscall 35; a fixed delay let a slow guest's
# kmsleep finish its first one first: the rounds traced are those left)
i=0
while [ "$(cut -d' ' -f1 "/proc/$kp/syscall" 2>/dev/null)" != 35 ] && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
kill -STOP "$kp"
i=0
while [ "$(state "$kp")" != T ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
run stopped_snap 30 "$G" snap -v -p "$kp" -o "$O/stopped.core"
state "$kp" >"$O/stopped_snap.state"
# its rbx: the sleeps left, the one it is in included (the rounds the last
# trace must hold are one fewer); its rax: the sleep's result, -516
# (-ERESTART_RESTARTBLOCK: it restarts at the SIGCONT) or 0 (the SIGSTOP
# came as the sleep ended: it does not)
[ -s "$O/stopped.core" ] && "$G" show "$O/stopped.core" | grep -E '"(rax|rbx)"' >"$O/stopped_snap.rbx"
rm -f "$O/stopped.core"
run stopped_wait 30 "$G" trace -p "$kp" --range "$LOOP_START-$LOOP_LAST" --duration 0.5 -o "$O/stopped_wait.jsonl"
state "$kp" >"$O/stopped_wait.state"
flush
rm -f "$O/.stopped.err"
(
	timeout 30 "$G" trace -p "$kp" --range "$LOOP_START-$LOOP_LAST" -o "$O/stopped.jsonl" \
		>"$O/stopped.out" 2>"$O/.stopped.err"
	echo $? >"$O/.stopped.rc"
) &
gp=$!
i=0
while ! grep -q "is stopped" "$O/.stopped.err" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
sleep 0.5
state "$kp" >"$O/stopped.state"
kill -CONT "$kp"
wait "$gp"
wait "$kp"
echo $? >"$O/stopped.target"
mv "$O/.stopped.err" "$O/stopped.err"
mv "$O/.stopped.rc" "$O/stopped.rc"
flush

# (8) a target in strict seccomp mode (read, write, exit only; issue 23):
# gebpf reads "Seccomp:" first and injects nothing (the step engine and the
# probe trap); kmstrict must finish ("kmstrict ok", exit 0), not be
# SIGKILLed by an injected mmap (strict.target: its exit status).  Its stdin
# is a fifo held open until gebpf is done (a fixed `sleep 2 |` ended it
# while a slow guest's gebpf was still attaching: "exited during the trace").
# Its output is kept out of flush's sight (a dot file) until it has ended.
rm -f "$O/.strict.fifo"
mkfifo "$O/.strict.fifo"
"$P/kmstrict" <"$O/.strict.fifo" >"$O/.strict.out" &
kp=$!
exec 9>"$O/.strict.fifo"
sleep 0.3
run strict 30 "$G" trace -p "$kp" --range "$TICK_START-$TICK_LAST" --duration 0.5 -o "$O/strict.jsonl"
exec 9>&-
wait "$kp"
echo $? >"$O/strict.target"
rm -f "$O/.strict.fifo"
mv "$O/.strict.out" "$O/strict.target.out"
flush

# (9) a 1 ms SIGALRM whose handler runs outside the range (issue 23): the
# owner's handler runs natively to its rt_sigreturn (PTRACE_SYSCALL stops,
# the frame's restored registers at its exit stop); kmalarm must finish
# ("kmalarm ok", exit 0, after its stdin ends: alarm.target), and the trace keep growing: whole
# calls of `work` while the timer runs
# (it outlives gebpf: its output is kept out of flush's sight, a dot file,
# until it has ended)
# (its stdin a fifo held open until gebpf is done, as strict's)
rm -f "$O/.alarm.fifo"
mkfifo "$O/.alarm.fifo"
"$P/kmalarm" <"$O/.alarm.fifo" >"$O/.alarm.out" &
kp=$!
exec 9>"$O/.alarm.fifo"
sleep 0.3
run alarm 30 "$G" trace -v -p "$kp" --range "$ALARM_START-$ALARM_LAST" --duration 2 --max-events 20000 -o "$O/alarm.jsonl"
exec 9>&-
wait "$kp"
echo $? >"$O/alarm.target"
rm -f "$O/.alarm.fifo"
mv "$O/.alarm.out" "$O/alarm.target.out"
flush

# (10) Python frames in the sampled stacks (issue 24): Debian 12's python3.11
# (in the guest: the interpreter, its libraries and the few stdlib files
# scripts/kmatrix stages) runs kmpy.py, attached with -p for 4 s; gebpf
# reads its frame chain in the BPF program and names the code objects: the
# folded stacks and the pprof profile must show kmpy's functions among the
# native frames.  kmpy works until its stdin, a fifo held open until gebpf
# is done, ends: gebpf reads the code objects from the process as it reads
# the samples, which under TCG takes it far longer than the samples took (a
# launched kmpy had exited before most were named), and a loaded guest may
# take seconds to attach.
# Its output is kept out of flush's sight (a dot file) until it has ended.
if [ -x /usr/bin/python3.11 ]; then
	rm -f "$O/.python.fifo"
	mkfifo "$O/.python.fifo"
	/usr/bin/python3.11 "$P/kmpy.py" <"$O/.python.fifo" >"$O/.python.out" &
	kp=$!
	exec 9>"$O/.python.fifo"
	sleep 1
	run python 60 "$G" sample -v -p "$kp" --folded -F 499 --duration 4 -o "$O/python.folded" \
		--pprof "$O/python.pb.gz"
	exec 9>&-
	wait "$kp"
	echo $? >"$O/python.target"
	rm -f "$O/.python.fifo"
	mv "$O/.python.out" "$O/python.target.out"
	flush
else
	echo "kmatrix: /usr/bin/python3.11: not here (scripts/kmatrix stages Debian 12's python3.11 from the host)" >"$O/python.err"
	echo 127 >"$O/python.rc"
	flush
fi

echo "kmatrix: smoke suite done" >&2
[ -z "${KM_CHANNEL:-}" ] || echo "@@KM-DONE" >>"$KM_CHANNEL"
