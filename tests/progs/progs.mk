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

# trap_mix: `mix` and its callers' loop stay in definition order on one page.
$(OUTPUT)/progs/trap_mix: PROG_CFLAGS += -fno-toplevel-reorder
