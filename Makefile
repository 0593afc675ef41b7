# gebpf build. Layout and habits: libbpf-tools / libbpf-bootstrap.
#   make            build ./gebpf (objects under .output/)
#   make test       unit tests (Criterion) + end-to-end tests (pytest)
#   make bench      benchmarks (prints ratios)
#   make kmatrix    kernel-version matrix under QEMU TCG
#   make qemu10     QEMU 10 user mode from Debian's source (scripts/qemu10) and
#                   its plugin, .output/gebpf-qemu10.so (gebpf qemu --values)
#   V=1             show full commands
#   SANITIZE=1      AddressSanitizer + UndefinedBehaviorSanitizer build, into
#                   .output-asan (scripts/test runs the bad-input, corrupt-snapshot
#                   and unit tests under it; docs/testing.md)
ifeq ($(SANITIZE),1)
OUTPUT    := .output-asan
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# -O1, as ASan's documentation advises: the checks are the same, the build
# takes a third less CPU than at -O2 (scripts/test builds it on every run)
CFLAGS    ?= -g -O1
else
OUTPUT    := .output
SAN_FLAGS :=
endif
CC        ?= gcc
CLANG     ?= clang
BPFTOOL   ?= $(shell command -v bpftool 2>/dev/null || echo /usr/sbin/bpftool)
PYTHON    ?= /usr/bin/python3
ARCH      := x86

CFLAGS    ?= -g -O2
CFLAGS    += $(SAN_FLAGS) -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
             -D_GNU_SOURCE -MMD -MP
INCLUDES  := -Iuser -Ibpf -I$(OUTPUT) -I$(OUTPUT)/proto
LDLIBS    := -lZydis -lbpf -ldw -lelf -lcjson -lcrypto -lprotobuf-c -lz -lpthread
LDLIBS    += -lzstd -liberty
# pprof's profile.proto as Debian ships it (golang-github-google-pprof-dev).
PROFILE_PROTO ?= /usr/share/gocode/src/github.com/google/pprof/proto/profile.proto
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Ivmlinux -Ibpf -I$(OUTPUT) -Wall

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

USER_SRCS := $(sort $(shell find user -name '*.c' -not -path 'user/qemu/*'))
USER_OBJS := $(patsubst %.c,$(OUTPUT)/%.o,$(USER_SRCS)) $(OUTPUT)/proto/profile.pb-c.o
LIB_OBJS  := $(filter-out $(OUTPUT)/user/cli/%,$(USER_OBJS))
BPF_SRCS  := $(sort $(wildcard bpf/*.bpf.c))
BPF_OBJS  := $(patsubst bpf/%.bpf.c,$(OUTPUT)/bpf/%.bpf.o,$(BPF_SRCS))
SKELS     := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.skel.h,$(BPF_SRCS))
UNIT_SRCS := $(sort $(wildcard tests/unit/*.c))
UNIT_OBJS := $(patsubst %.c,$(OUTPUT)/%.o,$(UNIT_SRCS))

.DELETE_ON_ERROR:
# BPF objects are inputs of the skeletons, not throw-away intermediates.
.SECONDARY: $(BPF_OBJS)
.PHONY: all clean test unit e2e bench kmatrix progs gebpf qemu10

BIN       := $(OUTPUT)/gebpf
# QEMU 10 and its plugin (below): `make` builds the plugin once QEMU 10 is there
QEMU10    := $(OUTPUT)/qemu10
QEMU10_IF_BUILT := $(if $(wildcard $(QEMU10)/bin/qemu-x86_64),$(OUTPUT)/gebpf-qemu10.so)

all: gebpf progs services $(OUTPUT)/probecheck $(OUTPUT)/gebpf-qemu.so $(QEMU10_IF_BUILT)

# ./gebpf is a link to the binary of the default output directory; a build
# with OUTPUT=.output-x (used to build side by side) leaves it alone.
gebpf: $(BIN)
ifeq ($(OUTPUT),.output)
	$(Q)ln -sf $(BIN) gebpf
endif

$(BIN): $(USER_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# protobuf-c code for pprof's profile.proto (user/sample/pprof.c).
$(OUTPUT)/proto/profile.pb-c.c $(OUTPUT)/proto/profile.pb-c.h &: $(PROFILE_PROTO)
	$(call msg,PROTOC,$@)
	$(Q)mkdir -p $(OUTPUT)/proto
	$(Q)protoc-c --c_out=$(OUTPUT)/proto --proto_path=$(dir $<) $(notdir $<)

$(OUTPUT)/proto/profile.pb-c.o: $(OUTPUT)/proto/profile.pb-c.c
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -w -I$(OUTPUT)/proto -c $< -o $@

# Every user object waits for the skeletons (order-only: -MMD then tracks the
# exact skeleton each object includes, so a changed BPF program rebuilds only
# its users).
$(OUTPUT)/%.o: %.c | $(SKELS) $(OUTPUT)/proto/profile.pb-c.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(INCLUDES) -c $< -o $@

$(OUTPUT)/bpf/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) vmlinux/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUTPUT)/%.skel.h: $(OUTPUT)/bpf/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

# The kernel matrix's probe-trap check (scripts/kmatrix.d/probecheck.c),
# shipped into the guests beside gebpf.
$(OUTPUT)/probecheck: scripts/kmatrix.d/probecheck.c $(LIB_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(INCLUDES) $^ $(LDLIBS) -o $@

# The README demo's tracee.
$(OUTPUT)/demo: scripts/demo.c
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O1 -g -static -no-pie -fno-pie -fno-inline $< -o $@

# Benchmark helpers: the raw single-step loop and the stepping tracee.
$(OUTPUT)/bench/rawstep: bench/rawstep.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 $< -o $@

$(OUTPUT)/bench/%: bench/%.S
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -g -static -no-pie -nostdlib $< -o $@

# The qsort job of bench_engines.py (a real hot function: libc's qsort
# calling the comparator) and bench_traps.py's short hash called 200k times.
$(OUTPUT)/bench/qsortjob $(OUTPUT)/bench/shortcall: $(OUTPUT)/bench/%: bench/%.c
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -static -no-pie -fno-pie $< -o $@

# bench_budget.py's threads calling a hash after the trace's budget is full.
$(OUTPUT)/bench/budgetjob: bench/budgetjob.c
	$(call msg,PROG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -static -no-pie -fno-pie -pthread $< -o $@

# The stop-free mode of user/jit in one process (bench_nostop.py).
$(OUTPUT)/bench/jit_nostop: bench/jit_nostop.c $(LIB_OBJS)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(INCLUDES) $< $(LIB_OBJS) $(LDLIBS) -o $@

# bench_qemu.py's anchor: a plain one-file QEMU plugin writing the same lines
# (skipped with gebpf's plugin where qemu-plugin.h cannot be had).
$(OUTPUT)/bench/plainplugin.so: bench/plainplugin.c $(OUTPUT)/gebpf-qemu.so
	$(call msg,PLUGIN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)if [ -f $(OUTPUT)/qemu-include/qemu-plugin.h ]; then \
		$(CC) -O2 -Wall -Wextra -fPIC -shared -I$(OUTPUT)/qemu-include $< -o $@; \
	else echo "  SKIP     $@: no qemu-plugin.h (docs/qemu.md)"; fi

BENCH_BINS := $(OUTPUT)/bench/plainplugin.so $(OUTPUT)/bench/rawstep $(OUTPUT)/bench/qsortjob $(OUTPUT)/bench/shortcall \
              $(OUTPUT)/bench/jit_nostop $(OUTPUT)/bench/budgetjob \
              $(patsubst bench/%.S,$(OUTPUT)/bench/%,$(wildcard bench/*.S))
$(patsubst bench/%.S,$(OUTPUT)/bench/%,$(wildcard bench/*.S)): bench/tracee.inc

# Unit tests: one Criterion binary from tests/unit/*.c and every non-CLI object.
$(OUTPUT)/unit-tests: $(UNIT_OBJS) $(LIB_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -lcriterion -o $@

unit: $(OUTPUT)/unit-tests
	$(OUTPUT)/unit-tests --jobs 2

e2e: gebpf progs services
	GEBPF_OUTPUT=$(abspath $(OUTPUT)) $(PYTHON) -m pytest -q tests/e2e

test: unit e2e

bench: gebpf progs services $(BENCH_BINS) $(OUTPUT)/gebpf-qemu.so
	GEBPF_OUTPUT=$(abspath $(OUTPUT)) $(PYTHON) bench/run.py

kmatrix: gebpf progs $(OUTPUT)/probecheck
	scripts/kmatrix

# The QEMU TCG plugin (user/qemu/, docs/qemu.md), beside gebpf.  It needs
# QEMU's qemu-plugin.h, which no Debian binary package ships:
# scripts/qemu-plugin-h takes it from Debian's qemu source package (once,
# cached in $(OUTPUT)/qemu-include).  Where that fails (no network, no
# qemu-user) the plugin is left out with one line, and its tests skip.
QEMU_PLUGIN_SRCS := $(filter-out user/qemu/values.c,$(sort $(wildcard user/qemu/*.c))) \
                    user/record/zframes.c
QEMU_PLUGIN_CFLAGS := -g -O2 -std=gnu11 -Wall -Wextra -D_GNU_SOURCE -fPIC -shared \
                      -fvisibility=hidden -Iuser -I$(OUTPUT)/qemu-include

$(OUTPUT)/gebpf-qemu.so: $(QEMU_PLUGIN_SRCS) $(wildcard user/qemu/*.h) user/record/zframes.h user/record/numfmt.h user/record/linefmt.h \
                         scripts/qemu-plugin-h
	$(call msg,PLUGIN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)if scripts/qemu-plugin-h $(OUTPUT)/qemu-include; then \
		$(CC) $(QEMU_PLUGIN_CFLAGS) $(QEMU_PLUGIN_SRCS) -lelf -lzstd -lpthread -o $@; \
	else echo "  SKIP     $@: no qemu-plugin.h (scripts/qemu-plugin-h failed; docs/qemu.md)"; fi

# QEMU 10's user mode with plugin support, built from Debian's qemu source
# package by scripts/qemu10 into $(OUTPUT)/qemu10 (bin/qemu-x86_64 and
# include/qemu-plugin.h; 1-2 minutes on 2 cores, 3 MB), and the plugin for
# its API, gebpf-qemu10.so: values=on (-DGB_QEMU_VALUES, with gebpf's
# decoder and glib).  `make qemu10` builds both; plain `make` builds the
# plugin only when $(OUTPUT)/qemu10 is there (docs/qemu.md "QEMU 10").
QEMU10_PLUGIN_SRCS := $(QEMU_PLUGIN_SRCS) user/qemu/values.c user/decode/decode.c \
                      user/decode/plan.c user/decode/written.c
QEMU10_PLUGIN_CFLAGS := $(filter-out -I$(OUTPUT)/qemu-include,$(QEMU_PLUGIN_CFLAGS)) \
                        -DGB_QEMU_VALUES -I$(QEMU10)/include

qemu10: $(QEMU10)/bin/qemu-x86_64 $(OUTPUT)/gebpf-qemu10.so

# (built once: scripts/qemu10 exits at once when it is there)
$(QEMU10)/bin/qemu-x86_64:
	$(call msg,QEMU10,$@)
	$(Q)scripts/qemu10 $(QEMU10)

$(OUTPUT)/gebpf-qemu10.so: $(QEMU10_PLUGIN_SRCS) $(wildcard user/qemu/*.h) user/record/zframes.h \
                           user/record/numfmt.h user/record/linefmt.h $(wildcard user/decode/*.h) \
                           $(QEMU10)/bin/qemu-x86_64
	$(call msg,PLUGIN,$@)
	$(Q)$(CC) $(QEMU10_PLUGIN_CFLAGS) $$(pkg-config --cflags glib-2.0) $(QEMU10_PLUGIN_SRCS) \
		-lZydis -lelf -lzstd -lpthread $$(pkg-config --libs glib-2.0) -o $@

# Static test programs (rules and flags live with the programs).  They are
# built without the sanitizers, so SANITIZE=1 builds them once, in the normal
# build, and links OUTPUT/progs to them (the unit tests and GEBPF_OUTPUT find
# them there) instead of building every one a second time.
ifeq ($(SANITIZE),1)
progs:
	$(Q)$(MAKE) --no-print-directory SANITIZE= progs
	$(Q)mkdir -p $(OUTPUT)
	$(Q)if [ -d $(OUTPUT)/progs ] && [ ! -L $(OUTPUT)/progs ]; then rm -rf $(OUTPUT)/progs; fi
	$(Q)ln -sfn ../.output/progs $(OUTPUT)/progs
else
include tests/progs/progs.mk
endif
# Services in Go, Rust, Java, Node and Python (test_services.py).
include tests/services/services.mk

clean:
	$(call msg,CLEAN)
	$(Q)rm -rf $(OUTPUT) gebpf

-include $(shell find $(OUTPUT) -type f -name '*.d' 2>/dev/null)
