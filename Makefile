# sheaf - top-level build.  `make` builds everything; `make test` runs every
# test, `make test-unit` (test-lib, test-daemon, test-crash, test-stress,
# test-trust, test-deploy) one tier of them; `make test-numa` boots QEMU
# guests of real NUMA topologies (tests/numa/); `make bench` runs the
# benchmarks; `make deps` installs packages.
# Sanitizers: `make test SAN=address` (ASan+UBSan) or `make test SAN=thread`.
# Debug: `make test DEBUG=1` builds with -DSHEAF_DEBUG=1 (SHEAF_ASSERT and the
# lock-order checks of shm/debug.h) into build-debug/ (with SAN= too:
# build-address-debug/ ...).

CC      ?= gcc
SAN     ?=
V       ?= 0
DEBUG   ?=
# SAN=debug, SAN=address-debug, SAN=thread-debug name the same builds as
# DEBUG=1 [SAN=...]: a build directory's name gives back its make flags
# (tests/deploy/test_systemd runs `make install SAN=<its build dir's suffix>`).
ifneq ($(filter debug %-debug,$(SAN)),)
override DEBUG := 1
override SAN   := $(patsubst %-debug,%,$(filter-out debug,$(SAN)))
endif
PREFIX  ?= /usr/local

DEB_PKGS   = libevent-dev libprotobuf-c-dev protobuf-c-compiler libnuma-dev systemd man-db \
             check pkg-config
BENCH_PKGS = libjemalloc-dev libgoogle-perftools-dev libmimalloc-dev gnuplot-nox \
             libdpdk-dev iceoryx libiceoryx-binding-c-dev
# `make fuzz` only (clang's libFuzzer and sanitizer runtimes).
FUZZ_PKGS  = clang libclang-rt-dev
# `make valgrind` only.
VG_PKGS    = valgrind
# `make test-numa` only (the guest's kernel comes from apt-get download).
NUMA_PKGS  = qemu-system-x86 busybox-static cpio

BUILD   := build$(if $(SAN),-$(SAN))$(if $(filter 1,$(DEBUG)),-debug)
CFLAGS  := -std=gnu11 -O2 -g -Wall -Wextra -Werror -fPIC -pthread \
           -D_GNU_SOURCE -fvisibility=hidden -I. -I$(BUILD) $(EXTRA_CFLAGS)
ifeq ($(DEBUG),1)
CFLAGS  += -DSHEAF_DEBUG=1
else ifneq ($(DEBUG),)
$(error DEBUG must be 1 or empty)
endif
LDFLAGS := -pthread $(EXTRA_LDFLAGS)
LIBS    := -lprotobuf-c -lnuma

ifeq ($(SAN),address)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer \
           -fno-sanitize-recover=undefined -DSHEAF_SANITIZE=1
LDFLAGS += -fsanitize=address,undefined
else ifeq ($(SAN),thread)
# -Wno-tsan: gcc refuses atomic_thread_fence under TSan (it does not model
# standalone fences); the grace scan, owned caches, queues and deferred
# frees use them between atomics, which TSan does not report either way.
CFLAGS  += -fsanitize=thread -DSHEAF_SANITIZE=1 -Wno-tsan
LDFLAGS += -fsanitize=thread
else ifneq ($(SAN),)
$(error SAN must be address or thread)
endif

CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null)

SHM_SRC    := $(wildcard shm/*.c shm/engine/*.c)
CLIENT_SRC := $(wildcard client/*.c)
PROTO_GEN  := $(BUILD)/proto/sheaf.pb-c.c $(BUILD)/proto/sheaf.pb-c.h
LIB_OBJ    := $(patsubst %.c,$(BUILD)/%.o,$(SHM_SRC) $(CLIENT_SRC) proto/frame.c proto/call.c proto/peer.c proto/text.c) \
              $(BUILD)/proto/sheaf.pb-c.o
# Test hooks (-DSHEAF_TEST_HOOKS: the stop points of the ring, of the
# lane fold, of the shared queues and of owned caches' alloc and free,
# vet.c's two tests side by side) exist only in libsheaf-test.a, which the test programs link: the
# sources below are built a second time under $(BUILD)/test-hooks/ and
# replace their release objects.
HOOK_SRC   := shm/ring.c shm/lanes.c client/vet.c shm/queue.c client/queue.c \
              client/owned_fast.c client/alloc.c client/free.c shm/engine/repair.c
HOOK_OBJ   := $(patsubst %.c,$(BUILD)/test-hooks/%.o,$(HOOK_SRC))
TEST_LIB   := $(BUILD)/libsheaf-test.a
HOOK_SYMS  := ring_stop_hook\|lane_fold_hook\|vet_test_compare\|queue_stop_hook\|owned_stop_hook
DAEMON_SRC := $(wildcard daemon/*.c)
DAEMON_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(DAEMON_SRC))
SHEAFD     := $(BUILD)/daemon/sheafd
CTL_OBJ    := $(patsubst %.c,$(BUILD)/%.o,$(wildcard client/sheafctl/*.c))
SHEAFCTL   := $(BUILD)/client/sheafctl/sheafctl
# The test programs, in tiers (a folder of tests/ each, built into the
# same folder under $(BUILD)/tests/; `make test-TIER` runs one tier, `make
# test` all of them in this order):
#   unit    the engine's layers driven directly (ring, slab, checker, vet)
#   lib     libsheaf's API on local pools (and with a sheafd where a case
#           needs another process)
#   daemon  sheafd's protocol and life, sheafctl
#   crash   processes killed amid their work, and the repair
#   stress  long multi-thread and multi-process runs, and scale
#   trust   hostile and untrusted clients, the read-only engine part
#   deploy  make install, programs linked against it, systemd
# A test program is tests/TIER/test_*.c: its folder alone places it.  The
# helpers it links are tests/helpers/util_*.c.
TEST_TIERS := unit lib daemon crash stress trust deploy
$(foreach t,$(TEST_TIERS),$(eval TEST_BIN_$(t) := \
	$(patsubst tests/%.c,$(BUILD)/tests/%,$(sort $(wildcard tests/$(t)/test_*.c)))))
TEST_BIN   := $(foreach t,$(TEST_TIERS),$(TEST_BIN_$(t)))
TEST_OBJ   := $(addsuffix .o,$(TEST_BIN))
TEST_UTIL  := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/helpers/util_*.c))
BENCH_BIN  := $(BUILD)/tests/bench/sheafbench
# tests/bench/scale/walks.c: the scale measurements (what the walks over
# clients, lanes and caches cost, how long attaching takes), linked like
# a test program and placed beside them (it finds sheafd as they do).
SCALE_BENCH := $(BUILD)/tests/scale_walks
BENCH_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(filter-out tests/bench/dpdkbench.c,$(wildcard tests/bench/*.c)))
# The DPDK rte_mempool peer (tests/bench/dpdkbench.c) is optional: built for
# `make bench` only when pkg-config finds libdpdk (its headers as -isystem).
DPDK_CFLAGS := $(patsubst -I%,-isystem %,$(shell pkg-config --cflags libdpdk 2>/dev/null))
DPDK_LIBS   := $(shell pkg-config --libs libdpdk 2>/dev/null)
DPDK_BENCH  := $(if $(DPDK_LIBS),$(BUILD)/tests/bench/dpdkbench)

.PHONY: all lib tests test bench bench-sweep deps clean check-deps deps-or-check run
all: lib $(SHEAFD) $(SHEAFCTL) tests $(BENCH_BIN) $(SCALE_BENCH)

lib: $(BUILD)/libsheaf.a $(BUILD)/libsheaf.so

# One run of protoc-c makes both files (a grouped target: never two runs
# at once under -j).
$(BUILD)/proto/sheaf.pb-c.c $(BUILD)/proto/sheaf.pb-c.h &: proto/sheaf.proto
	@mkdir -p $(BUILD)/proto
	protoc-c --proto_path=proto --c_out=$(BUILD)/proto $<

$(BUILD)/proto/sheaf.pb-c.o: $(BUILD)/proto/sheaf.pb-c.c
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.c | $(PROTO_GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/test-hooks/%.o: %.c | $(PROTO_GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DSHEAF_TEST_HOOKS=1 -MMD -MP -c $< -o $@

# Test programs see the hooks' declarations (shm/ring.h).
$(TEST_OBJ): CFLAGS += -DSHEAF_TEST_HOOKS=1
# So does the ring crash harness (its children stop through ring_stop_hook).
$(BUILD)/tests/crash/ring_crash_harness.o: CFLAGS += -DSHEAF_TEST_HOOKS=1

# sheafd's numa_error and numa_warn (daemon/numa_log.c) replace libnuma's
# weak ones wherever libnuma is loaded: exported.
$(SHEAFD): $(DAEMON_OBJ) $(BUILD)/libsheaf.a
	$(CC) $(LDFLAGS) -Wl,--export-dynamic-symbol=numa_error \
		-Wl,--export-dynamic-symbol=numa_warn -o $@ $(DAEMON_OBJ) $(BUILD)/libsheaf.a \
		-levent $(LIBS)

# sheafctl, the operator CLI (client/sheafctl/; not part of libsheaf: it uses
# only proto/ and libsheaf's public API).  $(BUILD)/client/sheafctl is its
# objects' folder: a plain file of that name is in the way, removed.
$(shell test -f $(BUILD)/client/sheafctl && rm -f $(BUILD)/client/sheafctl)
$(SHEAFCTL): $(CTL_OBJ) $(BUILD)/libsheaf.a
	$(CC) $(LDFLAGS) -o $@ $(CTL_OBJ) $(BUILD)/libsheaf.a $(LIBS)

$(BUILD)/libsheaf.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# -z nodelete: dlclose() leaves libsheaf mapped (threads that used it run
# its thread-exit hook when they end).
$(BUILD)/libsheaf.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libsheaf.so.$(SOMAJOR) -Wl,-z,nodelete $(LDFLAGS) -o $@ $^ $(LIBS)

$(TEST_LIB): $(filter-out $(patsubst %.c,$(BUILD)/%.o,$(HOOK_SRC)),$(LIB_OBJ)) $(HOOK_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(TEST_BIN): $(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_UTIL) $(TEST_LIB) | $(SHEAFD) $(SHEAFCTL)
	$(CC) $(LDFLAGS) -o $@ $< $(TEST_EXTRA) $(TEST_UTIL) $(TEST_LIB) $(CHECK_LIBS) $(LIBS)

# A test program's own extra objects (TEST_EXTRA, empty for the others),
# kept beside it and linked into that program only: test_hostile's hostile
# client (tests/trust/hostile_client.c).
HOSTILE_OBJ := $(BUILD)/tests/trust/hostile_client.o
$(BUILD)/tests/trust/test_hostile: $(HOSTILE_OBJ)
$(BUILD)/tests/trust/test_hostile: TEST_EXTRA := $(HOSTILE_OBJ)
# test_ring_crash's kill-point harness (tests/crash/ring_crash_harness.c).
RING_CRASH_OBJ := $(BUILD)/tests/crash/ring_crash_harness.o
$(BUILD)/tests/crash/test_ring_crash: $(RING_CRASH_OBJ)
$(BUILD)/tests/crash/test_ring_crash: TEST_EXTRA := $(RING_CRASH_OBJ)

$(SCALE_BENCH): $(BUILD)/tests/bench/scale/walks.o $(TEST_UTIL) $(TEST_LIB) | $(SHEAFD) $(SHEAFCTL)
	$(CC) $(LDFLAGS) -o $@ $< $(TEST_UTIL) $(TEST_LIB) $(CHECK_LIBS) $(LIBS)

# The NUMA tests (tests/numa/, `make test-numa`; not part of `make test`:
# they need QEMU and Debian's kernel package): numa_guest runs inside QEMU
# guests of real topologies, test_numa boots them (tests/numa/guest.sh
# builds the guest into $(BUILD)/numa/).  Both link like the test programs.
# numa_guest.c is the guest program's main; its suites and their helpers
# (tests/numa/guest_*.c) are its TEST_EXTRA.
NUMA_BIN := $(BUILD)/tests/numa/test_numa $(BUILD)/tests/numa/numa_guest
NUMA_GUEST_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/numa/guest_*.c))
$(BUILD)/tests/numa/numa_guest: $(NUMA_GUEST_OBJ)
$(BUILD)/tests/numa/numa_guest: TEST_EXTRA := $(NUMA_GUEST_OBJ)
$(NUMA_BIN): $(BUILD)/tests/numa/%: $(BUILD)/tests/numa/%.o $(TEST_UTIL) $(TEST_LIB) | $(SHEAFD) $(SHEAFCTL)
	$(CC) $(LDFLAGS) -o $@ $< $(TEST_EXTRA) $(TEST_UTIL) $(TEST_LIB) $(CHECK_LIBS) $(LIBS)

# The release artefacts must carry no test hook (nm lists local symbols too).
.PHONY: check-no-hooks
check-no-hooks: lib $(SHEAFD) $(SHEAFCTL)
	@if nm $(BUILD)/libsheaf.so $(BUILD)/libsheaf.a $(SHEAFD) $(SHEAFCTL) 2>/dev/null | \
		grep -w -e '$(HOOK_SYMS)'; then echo "test hooks in release artefacts"; exit 1; fi

# A test program outside a tier folder would be built by nobody and run by
# no target: name it.
TEST_STRAY := $(wildcard tests/test_*.c)
tests: $(TEST_BIN) $(NUMA_BIN)
	$(if $(TEST_STRAY),@echo "$(TEST_STRAY): not in a tier folder (tests/unit, lib, daemon, crash," \
		"stress, trust, deploy): git mv it into one"; exit 1)

$(BENCH_BIN): $(BENCH_OBJ) $(BUILD)/libsheaf.a
	$(CC) $(LDFLAGS) -o $@ $(BENCH_OBJ) $(BUILD)/libsheaf.a $(LIBS) -lm

$(BUILD)/tests/bench/dpdkbench.o: CFLAGS += $(DPDK_CFLAGS)

$(BUILD)/tests/bench/dpdkbench: $(BUILD)/tests/bench/dpdkbench.o
	$(CC) $(LDFLAGS) -o $@ $< $(DPDK_LIBS)

# Start sheafd in the foreground with defaults that need neither root nor
# systemd: socket under run/ (or $$XDG_RUNTIME_DIR/sheaf).
RUN_DIR ?= $(if $(XDG_RUNTIME_DIR),$(XDG_RUNTIME_DIR)/sheaf,$(CURDIR)/run)
run: deps-or-check
	@$(MAKE) --no-print-directory all
	@mkdir -p $(RUN_DIR)
	@echo "sheafd: socket $(RUN_DIR)/sheafd.sock -- clients: export SHEAF_SOCKET=$(RUN_DIR)/sheafd.sock"
	exec $(SHEAFD) --foreground --socket $(RUN_DIR)/sheafd.sock

# Each test program prints Check's summary line; any failure fails the
# target.  `make test-TIER` builds everything, checks the release artefacts
# for hooks and runs that tier's programs; `make test` does the same for
# every tier in turn, one after the other.
# $(call run_tier,TIER): the shell commands that run TIER's programs.
run_tier = set -e; for t in $(TEST_BIN_$(1)); do \
		echo "== $$t"; SHEAF_SAN="$(SAN)" CK_DEFAULT_TIMEOUT=600 $$t; \
	done; echo "== $(1) tests passed ($(words $(TEST_BIN_$(1))) programs$(if $(SAN), under SAN=$(SAN)))"
TEST_TIER_TARGETS := $(addprefix test-,$(TEST_TIERS))
.PHONY: $(TEST_TIER_TARGETS)
$(TEST_TIER_TARGETS): test-%: deps-or-check
	@$(MAKE) --no-print-directory all check-no-hooks
	@$(call run_tier,$*)

test: deps-or-check
	@$(MAKE) --no-print-directory all check-no-hooks
	@$(foreach t,$(TEST_TIERS),$(call run_tier,$(t));) \
	echo "== all tests passed ($(words $(TEST_BIN)) programs$(if $(SAN), under SAN=$(SAN)))"

# `make torture-owned`: test_owned_queue_crash's random-kill torture of an
# owned cache's queues, allocs and frees at length (SHEAF_OWNED_KILLS,
# 20000 kills by default; `make test` runs 1000 of them).
OWNED_KILLS ?= 20000
.PHONY: torture-owned
torture-owned: deps-or-check
	@$(MAKE) --no-print-directory all
	CK_RUN_CASE=torture CK_DEFAULT_TIMEOUT=3600 SHEAF_OWNED_KILLS=$(OWNED_KILLS) \
		$(BUILD)/tests/crash/test_owned_queue_crash

# `make test-numa`: build the guest (the kernel fetched once into
# $(BUILD)/numa/, the initramfs each run) and boot one QEMU guest per
# topology (tests/numa/test_numa.c; the guest's Check lines come through).
# A missing QEMU fails each topology unless SHEAF_TEST_SKIP_OK=1; a kernel
# that cannot be fetched fails here.  About a minute on 2 cores.
.PHONY: test-numa
test-numa: deps-or-check
	@$(MAKE) --no-print-directory lib $(SHEAFD) $(SHEAFCTL) $(NUMA_BIN)
	tests/numa/guest.sh $(BUILD) $(BUILD)/numa
	@echo "== $(BUILD)/tests/numa/test_numa"; \
	CK_DEFAULT_TIMEOUT=600 $(BUILD)/tests/numa/test_numa && echo "== numa tests passed"

# Memcheck over the test programs whose own processes do the work (local
# pools; the ring, slab, checker and size-class layers; libsheaf against a
# real sheafd, which runs natively: Debian 12's valgrind 3.19 has no
# pidfd_open, which sheafd calls for each attach).  Check forks each case
# under valgrind, and a case with a valgrind error exits 99 and fails.
# test_owned_caches is left out: its victims, slowed down by valgrind, are
# killed before they allocate anything, which its count requires.  Paths
# are relative to $(BUILD)/tests.
VALGRIND_TESTS := unit/test_ring crash/test_ring_repair unit/test_slab unit/test_slab_refuse \
                  unit/test_pool_check unit/test_vet lib/test_kmalloc lib/test_sheaf \
                  lib/test_names lib/test_counts deploy/test_systemd_units lib/test_free \
                  lib/test_deferred lib/test_queue trust/test_untrusted \
                  trust/test_untrusted_bare lib/test_bulk lib/test_stash
valgrind: all
	@command -v valgrind >/dev/null || { echo "valgrind is not installed: make deps, or apt-get install valgrind"; exit 1; }
	@set -e; for t in $(VALGRIND_TESTS); do \
		echo "== valgrind $$t"; \
		SHEAF_SAN=valgrind CK_DEFAULT_TIMEOUT=900 valgrind -q --error-exitcode=99 $(BUILD)/tests/$$t; \
	done; echo "== valgrind: $(words $(VALGRIND_TESTS)) programs, no errors"
.PHONY: valgrind

# W7 (messages between processes through a shared queue, and
# the Unix-socket baseline): tests/bench/w7/w7bench.c, its own program.
W7_BENCH := $(BUILD)/tests/bench/w7bench
$(W7_BENCH): tests/bench/w7/w7bench.c tests/bench/w7/w7.h $(BUILD)/libsheaf.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libsheaf.a $(LDFLAGS) $(LIBS)
# W7's peers, each built only when its library is there: DPDK primary +
# secondary (w7dpdk) and iceoryx through its C binding (w7iox; Debian's
# iceoryx + libiceoryx-binding-c-dev, headers under /usr/include/iceoryx/v*).
W7_DPDK := $(if $(DPDK_LIBS),$(BUILD)/tests/bench/w7dpdk)
$(BUILD)/tests/bench/w7dpdk: tests/bench/w7/w7dpdk.c tests/bench/w7/w7.h
	$(CC) $(CFLAGS) $(DPDK_CFLAGS) -o $@ $< $(LDFLAGS) $(DPDK_LIBS)
IOX_INC := $(firstword $(wildcard /usr/include/iceoryx/v*))
W7_IOX  := $(if $(and $(IOX_INC),$(wildcard $(IOX_INC)/iceoryx_binding_c/publisher.h)),$(BUILD)/tests/bench/w7iox)
$(BUILD)/tests/bench/w7iox: tests/bench/w7/w7iox.c tests/bench/w7/w7.h
	$(CC) $(CFLAGS) -isystem $(IOX_INC) -o $@ $< $(LDFLAGS) -liceoryx_binding_c

# W11 (topics: one publisher, N subscribers; tests/bench/w11/), with its
# iceoryx peer compiled in when the iceoryx C binding is there.
W11_BENCH := $(BUILD)/tests/bench/w11bench
W11_IOX_FLAGS := $(if $(W7_IOX),-DW11_IOX -isystem $(IOX_INC))
W11_IOX_LIBS  := $(if $(W7_IOX),-liceoryx_binding_c)
$(W11_BENCH): tests/bench/w11/w11bench.c $(BUILD)/libsheaf.a
	$(CC) $(CFLAGS) $(W11_IOX_FLAGS) -o $@ $< $(BUILD)/libsheaf.a $(LDFLAGS) $(LIBS) $(W11_IOX_LIBS)

# W9 (a shared table read under deferred frees): the bench mode of
# tests/examples/rcu_table.c linked with libsheaf.a, and its in-process
# DPDK rte_rcu QSBR peer tests/bench/w9/w9dpdk.c (no EAL; when libdpdk is
# found).  tests/bench/run.sh finds both next to sheafbench.
W9_BENCH := $(BUILD)/tests/bench/rcu_table
W9_DPDK  := $(if $(DPDK_LIBS),$(BUILD)/tests/bench/w9dpdk)
$(W9_BENCH): tests/examples/rcu_table.c tests/examples/rcu_table.h $(BUILD)/libsheaf.a
	$(CC) $(CFLAGS) -Iclient -o $@ $< $(BUILD)/libsheaf.a $(LDFLAGS) $(LIBS)
$(BUILD)/tests/bench/w9dpdk: tests/bench/w9/w9dpdk.c tests/examples/rcu_table.h
	$(CC) $(CFLAGS) $(DPDK_CFLAGS) -o $@ $< $(LDFLAGS) $(DPDK_LIBS)

bench: check-deps $(BENCH_BIN) $(SHEAFD) $(DPDK_BENCH) $(W7_BENCH) $(W7_DPDK) $(W7_IOX) $(SCALE_BENCH) $(W9_BENCH) $(W9_DPDK) $(W11_BENCH)
	$(if $(DPDK_BENCH),,@echo "note: pkg-config libdpdk failed: the DPDK peer is not built; the bench runs without it")
	tests/bench/run.sh $(BENCH_BIN)
	BENCH_QUICK=1 tests/bench/sweep.sh $(BENCH_BIN)
	BENCH_QUICK=1 tests/bench/stash_sweep.sh $(BENCH_BIN)

# The curves (tests/bench/sweep.sh): W2 batch sweep and W5 capacity sweep at
# 64, 256 and 1024 bytes, tables and gnuplot PNGs under results/.
# tests/bench/stash_sweep.sh: W2 by the stash limits (through a sheafd).
bench-sweep: $(BENCH_BIN) $(SHEAFD) $(SHEAFCTL)
	tests/bench/sweep.sh $(BENCH_BIN)
	tests/bench/stash_sweep.sh $(BENCH_BIN)

# `make run` and `make test` install missing packages when run as root (a
# fresh machine), and name them otherwise.
deps-or-check:
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory deps; else $(MAKE) --no-print-directory check-deps; fi

check-deps:
	@missing=""; for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "missing packages:$$missing -- run 'make deps' (as root) or: sudo apt-get install -y$$missing"; exit 1; \
	fi

deps:
	@missing=""; for p in $(DEB_PKGS) $(BENCH_PKGS) $(FUZZ_PKGS) $(VG_PKGS) $(NUMA_PKGS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "all packages present"; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq$$missing; \
	else echo "run as root: apt-get install -y$$missing"; exit 1; fi

clean:
	rm -rf build build-address build-thread build-debug build-address-debug build-thread-debug \
		build-fuzz

.SECONDARY: $(TEST_UTIL) $(HOSTILE_OBJ) $(RING_CRASH_OBJ)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ---------------------------------------------------------------------------
# Fuzzing (tests/fuzz/, README "Testing").  Three libFuzzer targets
# built with clang under ASan+UBSan into build-fuzz/ (whatever SAN= says):
#   fuzz_rpc     a connection's bytes -> consume_frames -> rpc_handle (sheafd)
#   fuzz_shm     client-writable region contents -> the engine's pass, repair,
#                checker and stats
#   fuzz_engine  writes into named SHARED fields interleaved with engine
#                steps (passes, rebuilds, repair, grace, adoption, checker,
#                destroy, queues), the engine built with SHEAF_DEBUG=1
# `make fuzz-build` builds them; `make fuzz-regress` replays the inputs that
# once crashed them (tests/fuzz/crashes_*); `make fuzz [FUZZ_SECONDS=60]`
# does that, then runs each target for that long on its seed corpus (new
# inputs go to build-fuzz/corpus_*), failing on the first crash (the input
# is left in build-fuzz/artifacts/).
# `make fuzz-corpus` rewrites tests/fuzz/corpus_rpc/ from gen_corpus_rpc.c.
# ---------------------------------------------------------------------------
FUZZ_BUILD   := build-fuzz
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                -fno-omit-frame-pointer
FUZZ_BASE    := -std=gnu11 -O1 -g -Wall -Wextra -Werror -pthread -D_GNU_SOURCE \
                -DSHEAF_SANITIZE=1 -I. -I$(FUZZ_BUILD) $(FUZZ_SAN)
FUZZ_CFLAGS  := $(FUZZ_BASE) -fsanitize=fuzzer-no-link
# fuzz_rpc links shm/ without coverage feedback (build-fuzz/nocov/, still
# under the sanitizers): the checker's and the stats' loops would otherwise
# dominate its run time with comparisons traced for inputs that do not
# steer them; fuzz_shm links the instrumented shm/.
FUZZ_SHM_OBJ   := $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(SHM_SRC))
FUZZ_NOCOV_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/nocov/%.o,$(SHM_SRC))
FUZZ_DMN_OBJ   := $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(filter-out daemon/main.c,$(DAEMON_SRC)))
FUZZ_LIB_OBJ   := $(FUZZ_SHM_OBJ) $(FUZZ_NOCOV_OBJ) $(FUZZ_DMN_OBJ) $(FUZZ_BUILD)/proto/sheaf.pb-c.o \
                  $(FUZZ_BUILD)/proto/text.o
# fuzz_engine links shm/ built with SHEAF_DEBUG=1 (build-fuzz/debug/): an
# assertion a client-writable value reaches is a finding (shm/debug.h).
FUZZ_DBG_OBJ   := $(patsubst %.c,$(FUZZ_BUILD)/debug/%.o,$(SHM_SRC))
FUZZ_LIB_OBJ   += $(FUZZ_DBG_OBJ)
FUZZ_TARGETS   := $(FUZZ_BUILD)/fuzz_rpc $(FUZZ_BUILD)/fuzz_shm $(FUZZ_BUILD)/fuzz_engine
# fuzz_shm: the readers that walk every lane, sheaf and object each input
# (checker, stats, lane counts, the owner tags' and the names' scans) keep edge coverage but lose comparison
# tracing, which cost fuzz_shm half its time in their loops.
FUZZ_SHM_NOCMP := $(FUZZ_BUILD)/shm/engine/check.o $(FUZZ_BUILD)/shm/stats.o $(FUZZ_BUILD)/shm/lanes.o \
                  $(FUZZ_BUILD)/shm/engine/clients.o $(FUZZ_BUILD)/shm/engine/owner.o \
                  $(FUZZ_BUILD)/shm/names.o $(FUZZ_BUILD)/shm/engine/names.o
$(FUZZ_SHM_NOCMP): FUZZ_CFLAGS += -fno-sanitize-coverage=trace-cmp
$(patsubst $(FUZZ_BUILD)/%,$(FUZZ_BUILD)/debug/%,$(FUZZ_SHM_NOCMP)): FUZZ_CFLAGS += \
	-fno-sanitize-coverage=trace-cmp

.PHONY: fuzz fuzz-build fuzz-corpus fuzz-regress
.SECONDARY: $(FUZZ_LIB_OBJ) $(patsubst $(FUZZ_BUILD)/%,$(FUZZ_BUILD)/tests/fuzz/%.o,$(FUZZ_TARGETS))
fuzz-build: $(FUZZ_TARGETS)

$(FUZZ_BUILD)/proto/sheaf.pb-c.c $(FUZZ_BUILD)/proto/sheaf.pb-c.h: proto/sheaf.proto
	@mkdir -p $(FUZZ_BUILD)/proto
	protoc-c --proto_path=proto --c_out=$(FUZZ_BUILD)/proto $<

$(FUZZ_BUILD)/%.o: %.c | $(FUZZ_BUILD)/proto/sheaf.pb-c.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/debug/%.o: %.c | $(FUZZ_BUILD)/proto/sheaf.pb-c.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -DSHEAF_DEBUG=1 -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/nocov/%.o: %.c | $(FUZZ_BUILD)/proto/sheaf.pb-c.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_BASE) -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/proto/sheaf.pb-c.o: $(FUZZ_BUILD)/proto/sheaf.pb-c.c
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

FUZZ_LINK = $(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -pthread -o $@ $^ -levent $(LIBS)
# fuzz_rpc runs no engine thread: engine_start is wrapped (fuzz_rpc.c).
$(FUZZ_BUILD)/fuzz_rpc: $(FUZZ_BUILD)/tests/fuzz/fuzz_rpc.o $(FUZZ_DMN_OBJ) $(FUZZ_NOCOV_OBJ) \
		$(FUZZ_BUILD)/proto/sheaf.pb-c.o $(FUZZ_BUILD)/proto/text.o
	$(FUZZ_LINK) -Wl,--wrap=engine_start
$(FUZZ_BUILD)/fuzz_shm: $(FUZZ_BUILD)/tests/fuzz/fuzz_shm.o $(FUZZ_BUILD)/tests/fuzz/snap.o \
		$(FUZZ_SHM_OBJ)
	$(FUZZ_LINK)
$(FUZZ_BUILD)/tests/fuzz/fuzz_engine.o: FUZZ_CFLAGS += -DSHEAF_DEBUG=1
$(FUZZ_BUILD)/fuzz_engine: $(FUZZ_BUILD)/tests/fuzz/fuzz_engine.o $(FUZZ_BUILD)/tests/fuzz/snap.o \
		$(FUZZ_DBG_OBJ)
	$(FUZZ_LINK)

# The corpus generator is a plain program (no fuzzer runtime).
$(FUZZ_BUILD)/gen_corpus_rpc: tests/fuzz/gen_corpus_rpc.c $(FUZZ_BUILD)/proto/sheaf.pb-c.c
	$(CC) -std=gnu11 -O1 -Wall -Wextra -Werror -I. -I$(FUZZ_BUILD) -o $@ $^ -lprotobuf-c

fuzz-corpus: $(FUZZ_BUILD)/gen_corpus_rpc
	@mkdir -p tests/fuzz/corpus_rpc
	$(FUZZ_BUILD)/gen_corpus_rpc tests/fuzz/corpus_rpc

# Each target: new inputs go to build-fuzz/corpus_NAME (the seeds in
# tests/fuzz/corpus_NAME are read, never written); a crash stops it and
# fails make.  fuzz_rpc's inputs stay short (512 bytes: a few dozen
# requests) so that it runs fast; fuzz_shm's are patches, up to 4 KiB of
# them; fuzz_engine's programs up to 512 bytes (about 12 steps and 30
# writes).  FUZZ_NAMES=engine (say) runs one target.
FUZZ_NAMES ?= rpc shm engine
FUZZ_OPTS_rpc    = -max_len=512 -dict=tests/fuzz/rpc.dict
FUZZ_OPTS_shm    = -max_len=4096
FUZZ_OPTS_engine = -max_len=512
FUZZ_RUN = ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# FUZZ_RUNS=N: N inputs per target instead of FUZZ_SECONDS (the long form,
# e.g. `make fuzz FUZZ_RUNS=10000000`: 10^7 inputs each).
FUZZ_LIMIT = $(if $(FUZZ_RUNS),-runs=$(FUZZ_RUNS),-max_total_time=$(FUZZ_SECONDS))

# The inputs that once crashed a target, run once each: any crash, sanitizer
# report or hang (5 s) fails.  `make fuzz` starts with it.
FUZZ_CRASHES_SHM    := $(wildcard tests/fuzz/crashes_shm/*)
FUZZ_CRASHES_ENGINE := $(wildcard tests/fuzz/crashes_engine/*)
fuzz-regress: fuzz-build
	$(if $(FUZZ_CRASHES_SHM),$(FUZZ_RUN) $(FUZZ_BUILD)/fuzz_shm -timeout=5 $(FUZZ_CRASHES_SHM))
	$(if $(FUZZ_CRASHES_ENGINE),$(FUZZ_RUN) $(FUZZ_BUILD)/fuzz_engine -timeout=5 \
		$(FUZZ_CRASHES_ENGINE))

define fuzz_one
	@mkdir -p $(FUZZ_BUILD)/corpus_$(1) tests/fuzz/corpus_$(1) $(FUZZ_BUILD)/artifacts
	$(FUZZ_RUN) $(FUZZ_BUILD)/fuzz_$(1) $(FUZZ_LIMIT) -timeout=10 $(FUZZ_OPTS_$(1)) \
		-print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/artifacts/$(1)- \
		$(FUZZ_BUILD)/corpus_$(1) tests/fuzz/corpus_$(1)

endef
define fuzz_merge_one
	$(FUZZ_RUN) $(FUZZ_BUILD)/fuzz_$(1) -merge=1 -timeout=10 $(FUZZ_OPTS_$(1)) \
		tests/fuzz/corpus_$(1) $(FUZZ_BUILD)/corpus_$(1)

endef

fuzz: fuzz-regress
	$(foreach n,$(FUZZ_NAMES),$(call fuzz_one,$(n)))

# The long form: FUZZ_LONG_RUNS (10^7) inputs per target, one target at a
# time, then the inputs that found new coverage merged into the seed
# corpora under tests/fuzz/ (fuzz-merge, libFuzzer's -merge=1: the seeds
# only grow by what adds coverage).  Each run prints its execs and exec/s
# (-print_final_stats).
FUZZ_LONG_RUNS ?= 10000000
.PHONY: fuzz-long fuzz-merge
fuzz-long:
	@$(MAKE) --no-print-directory fuzz FUZZ_RUNS=$(FUZZ_LONG_RUNS)
	@$(MAKE) --no-print-directory fuzz-merge

fuzz-merge: fuzz-build
	$(foreach n,$(FUZZ_NAMES),$(call fuzz_merge_one,$(n)))

-include $(shell find $(FUZZ_BUILD) -name '*.d' 2>/dev/null)

# ---------------------------------------------------------------------------
# install / uninstall.  `make install [PREFIX=/usr/local]
# [DESTDIR=/staging]`: sheafd, sheafctl, libsheaf (.so.VERSION with the .so.MAJOR
# and .so links, and .a), sheaf.h and sheaf_inline.h, sheaf.pc, the man pages,
# the systemd units with sysusers.d/tmpfiles.d snippets, an example config.  Every directory
# below may be overridden on the command line.  The units and man pages name
# /usr/local/sbin and /usr/local/etc; they are rewritten to SBINDIR and
# SYSCONFDIR on the way.  With SAN=, the sanitizer build is installed.
# ---------------------------------------------------------------------------
VERSION        := $(shell sed -n 's/^\#define SHEAF_VERSION "\(.*\)"/\1/p' proto/version.h)
SOMAJOR        := $(firstword $(subst ., ,$(VERSION)))
BINDIR         ?= $(PREFIX)/bin
SBINDIR        ?= $(PREFIX)/sbin
LIBDIR         ?= $(PREFIX)/lib
INCLUDEDIR     ?= $(PREFIX)/include
MANDIR         ?= $(PREFIX)/share/man
PKGCONFIGDIR   ?= $(LIBDIR)/pkgconfig
SYSCONFDIR     ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR    ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR    ?= $(PREFIX)/lib/tmpfiles.d
UNITS          := sheafd@.service sheafd@.socket sheafd.service sheafd.socket
CTL_MAN        := $(wildcard docs/sheafctl.1 docs/sheafctl.8)
PATH_SED       := sed -e 's|/usr/local/sbin/|$(SBINDIR)/|g' -e 's|/usr/local/etc/|$(SYSCONFDIR)/|g'

# The installed static library: one relocatable object whose hidden
# (internal) symbols are made local, so that only the sheaf_* API is visible
# to programs linking it, as with the shared library.
$(BUILD)/libsheaf-dist.a: $(LIB_OBJ)
	ld -r -o $(BUILD)/libsheaf-dist.o $(LIB_OBJ)
	objcopy --localize-hidden $(BUILD)/libsheaf-dist.o
	@rm -f $@
	ar rcs $@ $(BUILD)/libsheaf-dist.o

.PHONY: install uninstall
install: lib $(BUILD)/libsheaf-dist.a $(SHEAFD) $(SHEAFCTL)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
		$(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(SYSCONFDIR)/sheaf $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR)
	install -m 0755 $(SHEAFD) $(DESTDIR)$(SBINDIR)/sheafd
	install -m 0755 $(SHEAFCTL) $(DESTDIR)$(BINDIR)/sheafctl
	install -m 0755 $(BUILD)/libsheaf.so $(DESTDIR)$(LIBDIR)/libsheaf.so.$(VERSION)
	ln -sf libsheaf.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libsheaf.so.$(SOMAJOR)
	ln -sf libsheaf.so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/libsheaf.so
	install -m 0644 $(BUILD)/libsheaf-dist.a $(DESTDIR)$(LIBDIR)/libsheaf.a
	install -m 0644 client/sheaf.h $(DESTDIR)$(INCLUDEDIR)/sheaf.h
	install -m 0644 client/sheaf_inline.h $(DESTDIR)$(INCLUDEDIR)/sheaf_inline.h
	sed -e '/^#/d' -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
		-e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|g' \
		-e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|g' \
		sheaf.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/sheaf.pc
	$(PATH_SED) docs/sheafd.8 > $(DESTDIR)$(MANDIR)/man8/sheafd.8
	$(PATH_SED) docs/libsheaf.3 > $(DESTDIR)$(MANDIR)/man3/libsheaf.3
	$(foreach m,$(CTL_MAN),$(PATH_SED) $(m) > $(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m));)
	for u in $(UNITS); do $(PATH_SED) systemd/$$u > $(DESTDIR)$(SYSTEMDUNITDIR)/$$u || exit 1; done
	install -m 0644 systemd/sheafd.sysusers $(DESTDIR)$(SYSUSERSDIR)/sheafd.conf
	install -m 0644 systemd/sheafd.tmpfiles $(DESTDIR)$(TMPFILESDIR)/sheafd.conf
	$(PATH_SED) systemd/sheafd.conf.example > $(DESTDIR)$(SYSCONFDIR)/sheaf/sheafd.conf.example
	@# The default pool's config: a copy of the example, never overwritten.
	test -e $(DESTDIR)$(SYSCONFDIR)/sheaf/sheafd.conf || \
		cp $(DESTDIR)$(SYSCONFDIR)/sheaf/sheafd.conf.example $(DESTDIR)$(SYSCONFDIR)/sheaf/sheafd.conf
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/sheaf.pc $(DESTDIR)$(MANDIR)/man8/sheafd.8 \
		$(DESTDIR)$(MANDIR)/man3/libsheaf.3 \
		$(foreach m,$(CTL_MAN),$(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m))) \
		$(addprefix $(DESTDIR)$(SYSTEMDUNITDIR)/,$(UNITS)) \
		$(DESTDIR)$(SYSCONFDIR)/sheaf/sheafd.conf.example
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig || true; fi
	@echo "installed under $(DESTDIR)$(PREFIX); under systemd next: systemd-sysusers;" \
	      "systemd-tmpfiles --create sheafd.conf; systemctl daemon-reload;" \
	      "systemctl enable --now sheafd.socket (see README)"

# Removes what install put there; the default pool's config only when it is
# still the unmodified example.
uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/sheafd $(DESTDIR)$(BINDIR)/sheafctl \
		$(DESTDIR)$(LIBDIR)/libsheaf.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libsheaf.so.$(SOMAJOR) \
		$(DESTDIR)$(LIBDIR)/libsheaf.so $(DESTDIR)$(LIBDIR)/libsheaf.a $(DESTDIR)$(INCLUDEDIR)/sheaf.h \
		$(DESTDIR)$(INCLUDEDIR)/sheaf_inline.h \
		$(DESTDIR)$(PKGCONFIGDIR)/sheaf.pc $(DESTDIR)$(MANDIR)/man8/sheafd.8 \
		$(DESTDIR)$(MANDIR)/man3/libsheaf.3 $(DESTDIR)$(MANDIR)/man1/sheafctl.1 \
		$(DESTDIR)$(MANDIR)/man8/sheafctl.8 $(addprefix $(DESTDIR)$(SYSTEMDUNITDIR)/,$(UNITS)) \
		$(DESTDIR)$(SYSUSERSDIR)/sheafd.conf $(DESTDIR)$(TMPFILESDIR)/sheafd.conf
	if cmp -s $(DESTDIR)$(SYSCONFDIR)/sheaf/sheafd.conf $(DESTDIR)$(SYSCONFDIR)/sheaf/sheafd.conf.example; \
		then rm -f $(DESTDIR)$(SYSCONFDIR)/sheaf/sheafd.conf; fi
	rm -f $(DESTDIR)$(SYSCONFDIR)/sheaf/sheafd.conf.example
	rmdir $(DESTDIR)$(SYSCONFDIR)/sheaf 2>/dev/null || true
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig || true; fi

# Topics under SIGKILL, the long form (tests/crash/test_topic_crash.c runs
# 1000 kills within `make test-crash`): SHEAF_TOPIC_KILLS kills, 20000 by
# default.
SHEAF_TOPIC_KILLS ?= 20000
.PHONY: test-topic-long
test-topic-long: all
	SHEAF_TOPIC_KILLS=$(SHEAF_TOPIC_KILLS) CK_DEFAULT_TIMEOUT=3600 \
		$(BUILD)/tests/crash/test_topic_crash
