/* Tracee register state -> the decoder's struct gb_cpu / struct gb_vec. */
#ifndef GB_TRACE_CPU_H
#define GB_TRACE_CPU_H

#include <sys/types.h>
#include <sys/user.h>

#include "decode/decode.h"

void gb_cpu_from_regs(struct gb_cpu *cpu, const struct user_regs_struct *r);
/* The field of r that holds general register slot k (enum gb_reg). */
unsigned long long *gb_regs_field(struct user_regs_struct *r, unsigned k);
/* Fill vec from the thread's XSAVE area (xmm, ymm upper halves, zmm, k). */
int gb_vec_read(pid_t tid, struct gb_vec *vec);

#endif
