# Test programs: tests/progs/NAME.c -> .output/progs/NAME (static, no PIE);
# tests/progs/NAME.S -> .output/progs/NAME (static, -nostdlib: exact counts).
PROG_C    := $(sort $(wildcard tests/progs/*.c))
PROG_S    := $(sort $(wildcard tests/progs/*.S))
PROG_BINS := $(patsubst tests/progs/%.c,$(OUTPUT)/progs/%,$(PROG_C)) \
             $(patsubst tests/progs/%.S,$(OUTPUT)/progs/%,$(PROG_S))
PROG_CFLAGS := -O1 -g -static -no-pie -fno-pie -pthread -fno-omit-frame-pointer

progs: $(PROG_BINS)

$(OUTPUT)/progs/%: tests/progs/%.c
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(PROG_CFLAGS) $< -o $@

$(OUTPUT)/progs/%: tests/progs/%.S
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -g -static -no-pie -nostdlib $< -o $@
