/* An in-range instruction becomes lines: the one place both engines (the
 * step runner, estep.c; the translating runner, ejit.c) and the probe trap
 * (the instruction a probe hit ran natively) write an instruction. */
#include <signal.h>

#include "trace/engine_int.h"

void eng_commit(struct gb_engine *e, size_t i, uint64_t pc, const struct gb_access *acc, int nacc)
{
	eng_commit_t(e, i, eng_th(e, i), pc, acc, nacc);
}

void eng_commit_t(struct gb_engine *e, size_t i, struct ethread *t, uint64_t pc,
		  const struct gb_access *acc, int nacc)
{
	for (int k = 0; k < nacc; k++)
		if (acc[k].write)
			gb_icache__note_write(e->ic, acc[k].addr, acc[k].size);
	if (t->vcpu < 0)
		t->vcpu = (int)e->next_vcpu++;
	gb_jsonl__insn(e->out, (uint32_t)t->vcpu, pc, acc, nacc, e->vt);
	if (e->o.faults_cb)
		e->o.faults_cb(e->o.faults_ctx, e, eng_tid(e, i), (uint32_t)t->vcpu, pc, e->vt);
	e->vt++;
}

bool eng_sync_fault(const struct gb_stop *st)
{
	return st->code > 0 && (st->sig == SIGSEGV || st->sig == SIGBUS || st->sig == SIGILL ||
				st->sig == SIGFPE);
}

/* After a step that ended in a signal-delivery-stop with no signal given:
 * did the instruction itself raise it (a synchronous exception: ud2,
 * int3, a faulting access, a divide error, a general-protection fault)?
 * Then it was executed: its exec line is written, with the lines of the
 * accesses it completed before the fault (docs/trace-format.md).  Returns
 * how many of its accesses completed, or -1 when the signal is not the
 * instruction's (it came from outside, or the fetch itself faulted). */
int eng_fault_done(uint64_t pc, uint8_t len, const struct gb_access *acc, int nacc,
		   const struct gb_stop *st, uint64_t rip)
{
	if (st->code <= 0) /* SI_USER, SI_TKILL, SI_QUEUE: sent, not raised */
		return -1;
	switch (st->sig) {
	case SIGTRAP: /* int3 (SI_KERNEL): a trap, rip is past it */
		return rip == pc + len ? 0 : -1;
	case SIGILL:
		return rip == pc ? 0 : -1;
	case SIGFPE: /* #DE after the divisor was read */
		return rip == pc ? nacc : -1;
	case SIGSEGV:
	case SIGBUS:
		if (rip != pc)
			return -1;
		if (st->fault_addr >= pc && st->fault_addr < pc + len) {
			/* The fetch faulted, unless an access covers it too. */
			bool data = false;
			for (int k = 0; k < nacc; k++)
				data |= st->fault_addr >= acc[k].addr &&
					st->fault_addr < acc[k].addr + acc[k].size;
			if (!data)
				return -1;
		}
		for (int k = 0; k < nacc; k++)
			if (st->fault_addr >= acc[k].addr && st->fault_addr < acc[k].addr + acc[k].size)
				return k;
		return 0; /* #GP (si_addr 0), alignment: before any access */
	default:
		return -1;
	}
}
