# Test programs: tests/progs/NAME.c -> .output/progs/NAME (static, no PIE);
# tests/progs/NAME.cc -> the same with g++ (C++ exceptions);
# tests/progs/NAME.S -> .output/progs/NAME (static, -nostdlib: exact counts).
PROG_C    := $(sort $(wildcard tests/progs/*.c))
PROG_CC   := $(sort $(wildcard tests/progs/*.cc))
PROG_S    := $(sort $(wildcard tests/progs/*.S))
PROG_BINS := $(patsubst tests/progs/%.c,$(OUTPUT)/progs/%,$(PROG_C)) \
             $(patsubst tests/progs/%.cc,$(OUTPUT)/progs/%,$(PROG_CC)) \
             $(patsubst tests/progs/%.S,$(OUTPUT)/progs/%,$(PROG_S))
CXX       ?= g++
PROG_CFLAGS := -O1 -g -static -no-pie -fno-pie -pthread -fno-omit-frame-pointer

progs: $(PROG_BINS)

$(OUTPUT)/progs/%: tests/progs/%.c tests/progs/trap_page.h
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(PROG_CFLAGS) $< -o $@

$(OUTPUT)/progs/%: tests/progs/%.cc
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(filter-out -pthread,$(PROG_CFLAGS)) $< -o $@

$(OUTPUT)/progs/%: tests/progs/%.S tests/progs/start_traced.inc
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -g -static -no-pie -nostdlib $< -o $@

# trap_dyn: dynamically linked PIE against progs/lib/libtrapfoo.so (from
# tests/progs/lib/trapfoo.c), found at run time through RUNPATH $ORIGIN/lib.
# These explicit rules take precedence over the static pattern rule above.
$(OUTPUT)/progs/lib/libtrapfoo.so: tests/progs/lib/trapfoo.c
	$(call msg,LIB,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O1 -g -fPIC -shared -fno-omit-frame-pointer $< -o $@

$(OUTPUT)/progs/trap_dyn: tests/progs/trap_dyn.c $(OUTPUT)/progs/lib/libtrapfoo.so
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O1 -g -fPIE -pie -fno-omit-frame-pointer $< -L$(OUTPUT)/progs/lib -ltrapfoo \
		-Wl,-rpath,'$$ORIGIN/lib' -o $@

# trap_smc's code page is writable and executable on purpose.
$(OUTPUT)/progs/trap_smc: PROG_CFLAGS += -Wl,--no-warn-rwx-segments

# pt_cold: -O2, so gcc splits `traced` into traced and traced.cold.
$(OUTPUT)/progs/pt_cold: PROG_CFLAGS += -O2

# pt_dlopen: dynamic PIE that dlopens progs/lib/libptdl.so (RUNPATH
# $ORIGIN/lib) after it starts; not linked against it.
$(OUTPUT)/progs/lib/libptdl.so: tests/progs/lib/ptdl.c
	$(call msg,LIB,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O1 -g -fPIC -shared -fno-omit-frame-pointer $< -o $@

$(OUTPUT)/progs/pt_dlopen: tests/progs/pt_dlopen.c $(OUTPUT)/progs/lib/libptdl.so
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O1 -g -fPIE -pie -fno-omit-frame-pointer $< -ldl -Wl,-rpath,'$$ORIGIN/lib' -o $@

# unwind_chain: a 6-deep call chain into lib/libunwindleaf.so, everything
# without frame pointers (gebpf sample --call-graph dwarf).
$(OUTPUT)/progs/lib/libunwindleaf.so: tests/progs/lib/unwindleaf.c
	$(call msg,LIB,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -fPIC -shared -fomit-frame-pointer $< -o $@

$(OUTPUT)/progs/unwind_chain: tests/progs/unwind_chain.c $(OUTPUT)/progs/lib/libunwindleaf.so
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -fPIE -pie -fomit-frame-pointer $< -L$(OUTPUT)/progs/lib -lunwindleaf \
		-Wl,-rpath,'$$ORIGIN/lib' -o $@

# trap_mix: `mix` and its callers' loop stay in definition order on one page.
$(OUTPUT)/progs/trap_mix: PROG_CFLAGS += -fno-toplevel-reorder

# name_strlen: dynamic PIE calling libc's strlen (an IFUNC) and
# lib/libnodbg.so, linked with -s (no .symtab) and with no debug file.
$(OUTPUT)/progs/lib/libnodbg.so: tests/progs/lib/nodbg.c
	$(call msg,LIB,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O1 -fPIC -shared -Wl,-s -Wl,--build-id $< -o $@

$(OUTPUT)/progs/name_strlen: tests/progs/name_strlen.c $(OUTPUT)/progs/lib/libnodbg.so
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O1 -g -fPIE -pie $< -L$(OUTPUT)/progs/lib -lnodbg -Wl,-rpath,'$$ORIGIN/lib' -o $@

# resume_vec: AVX2 / AVX-512 instructions, chosen at run time by CPUID.
$(OUTPUT)/progs/resume_vec: PROG_CFLAGS += -mavx2 -mavx512f -mavx512bw

# tc_except: dynamic (no PIE) with libstdc++ and libgcc linked in, so the
# unwinder finds FDEs through the loader instead of sorting every FDE of a
# static binary on the first throw (millions of steps under --trap none).
$(OUTPUT)/progs/tc_except: tests/progs/tc_except.cc
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) -O1 -g -no-pie -fno-pie -fno-omit-frame-pointer -static-libstdc++ -static-libgcc $< -o $@

# pt_relchurn: pt_churn's program with a `traced` of its own (included).
$(OUTPUT)/progs/pt_relchurn: tests/progs/pt_churn.c

# tc_probedfault.c is tc_shortfault.c built with TC_RESUME_BY_LENGTH.
$(OUTPUT)/progs/tc_probedfault: tests/progs/tc_shortfault.c

# pt_short: pt_crash's program with a `traced` of memmove's shape (included).
$(OUTPUT)/progs/pt_short: tests/progs/pt_crash.c

# libc_strings: dynamic, -fno-builtin: glibc's IFUNC variants of this CPU.
$(OUTPUT)/progs/libc_strings: tests/progs/libc_strings.c
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O1 -g -fno-builtin $< -o $@
$(OUTPUT)/progs/pt_short $(OUTPUT)/progs/pt_relchurn: tests/progs/pt_traced_tail.h
