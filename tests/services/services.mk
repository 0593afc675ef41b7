# Services for tests/e2e/test_services.py (docs/testing.md "Services"): one
# small multi-threaded program per runtime people deploy.  Go, Rust and Java
# are built here, under $(OUTPUT)/services/; Node and Python run their
# sources from tests/services/.  A toolchain that is missing leaves its
# service out with one SKIP line (scripts/packages.txt installs them), and
# its tests skip saying so.
GO        ?= go
RUSTC     ?= rustc
JAVAC     ?= javac
SVC_OUT   := $(OUTPUT)/services
SERVICES  := $(SVC_OUT)/svc_go $(SVC_OUT)/svc_rust $(SVC_OUT)/java/SvcJava.class

.PHONY: services
services: $(SERVICES)

# A toolchain: the command, or nothing (its service is then left out).
have = $(shell command -v $(1) 2>/dev/null)

# go build of one file (no module, no network); its cache under $(OUTPUT).
$(SVC_OUT)/svc_go: tests/services/svc_go.go
	$(call msg,GO,$@)
	$(Q)mkdir -p $(@D)
	$(Q)if [ -n "$(call have,$(GO))" ]; then \
		GOCACHE=$(abspath $(SVC_OUT))/go-cache GO111MODULE=off \
			$(GO) build -o $@ $<; \
	else echo "  SKIP     $@: no $(GO) (Debian: golang-go)"; fi

# rustc alone: std only, no cargo and no crates (Debian 12's rustc 1.63 on);
# without make's MAKEFLAGS, whose jobserver descriptors it cannot open (a
# warning in every build's log).
$(SVC_OUT)/svc_rust: tests/services/svc_rust.rs
	$(call msg,RUSTC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)if [ -n "$(call have,$(RUSTC))" ]; then \
		MAKEFLAGS= $(RUSTC) --edition 2021 -O -g -o $@ $<; \
	else echo "  SKIP     $@: no $(RUSTC) (Debian: rustc)"; fi

# javac once; run with the java on PATH (Debian 12: OpenJDK 17).
$(SVC_OUT)/java/SvcJava.class: tests/services/SvcJava.java
	$(call msg,JAVAC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)if [ -n "$(call have,$(JAVAC))" ]; then \
		$(JAVAC) -d $(@D) $<; \
	else echo "  SKIP     $@: no $(JAVAC) (Debian: default-jdk-headless)"; fi
