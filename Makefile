# runbox build. `make` builds ./runbox, the probe and the minimal image; `make test` installs
# what is missing (Debian packages), builds and runs every test; `make demo` shows one run.

CC       ?= gcc
PKGS     := libseccomp libcap libmnl libnftnl jansson libarchive
# The libraries are linked statically where Debian ships an archive (all but libmnl and
# glibc's): each shared library costs the loader its mapping, its relocations and their page
# faults at every start, ~12.5 us per fault on a PVM guest like the one this was measured on
# (A/B of 30 runs: -1.1 ms for seccomp, cap, nftnl and jansson; libcrypto and SQLite were
# 5.7M -> 2.7M start-up instructions under callgrind). The cost: a security update of one of
# them needs a rebuild of runbox. libcrypto contributes only SHA-256, base64 and cleanse:
# nothing may call its EVP or provider layer (see rb_hmac_sha256).
# libarchive (image import) is linked statically too: its shared library pulls in libxml2, ICU
# and libstdc++ (13 more libraries at every start); static, only its tar reader, disk reader
# and filters come in, needing just libzstd and libacl (Debian ships no archive of either).
STATIC_LIBS := -Wl,-Bstatic -lcrypto -lsqlite3 -lseccomp -lcap -lnftnl -ljansson -larchive -llzma -lbz2 -lz \
               -Wl,-Bdynamic -lmnl -l:libzstd.so.1 -l:libacl.so.1 -ldl -lpthread -lm
B        := build
# format-truncation is off: bounded snprintf into PATH_MAX buffers is the idiom here, and
# paths that do not fit are rejected where it matters (rb_paths_init, run dirs).
WARN     := -Wall -Wextra -Werror -Wformat=2 -Wshadow -Wno-unused-parameter -Wno-format-truncation
HARDEN   := -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fPIE
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu17 $(WARN) $(HARDEN) -I. -MMD -MP
LDFLAGS  += -pie -Wl,-z,relro,-z,now
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(STATIC_LIBS)
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# Library sources: everything in the components except the two mains and the HTTP endpoint,
# which only runbox-gateway links (libmicrohttpd loads a TLS library: ~12 ms per start).
GW_SRCS  := gateway/endpoint.c gateway/connector.c
GW_MAIN  := gateway/serve_main.c
LIB_SRCS := $(sort $(filter-out $(GW_SRCS) $(GW_MAIN),$(wildcard common/*.c ledger/*.c scrub/*.c runtime/*/*.c policy/*.c images/*.c gateway/*.c cli/cmd_*.c)))
MAIN_SRC := cli/main.c
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/obj/%.o)
SAN_OBJS := $(LIB_SRCS:%.c=$(B)/asan/%.o) $(GW_SRCS:%.c=$(B)/asan/%.o)
GW_LIBS  := $(shell pkg-config --libs libmicrohttpd libcurl 2>/dev/null)
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(B)/unit/%)
PROBE    := $(B)/probe
MINIMAL  := $(B)/images/minimal/rootfs

.PHONY: all deps test unit integration vmtest demo bench lint clean fuzz
# The sanitizer objects are intermediates of the unit binaries: kept, so they are not rebuilt.
.SECONDARY:
all: runbox runbox-gateway $(PROBE) $(B)/images/minimal/.built

deps:
	@scripts/install-deps.sh build

# Linked aside and renamed, so a runbox that is running (tests, benchmarks) never blocks a build.
runbox: $(LIB_OBJS) $(B)/obj/$(MAIN_SRC:.c=.o)
	$(CC) $(LDFLAGS) -o $@.tmp $^ $(PKG_LIBS)
	mv -f $@.tmp $@

runbox-gateway: $(LIB_OBJS) $(GW_SRCS:%.c=$(B)/obj/%.o) $(B)/obj/$(GW_MAIN:.c=.o)
	$(CC) $(LDFLAGS) -o $@.tmp $^ $(PKG_LIBS) $(GW_LIBS)
	mv -f $@.tmp $@

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -c -o $@ $<

$(B)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -U_FORTIFY_SOURCE $(PKG_CFLAGS) -c -o $@ $<

$(B)/unit/%: tests/unit/%.c $(SAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -U_FORTIFY_SOURCE $(PKG_CFLAGS) -o $@ $(filter %.c %.o,$^) $(PKG_LIBS) $(GW_LIBS) -lcmocka

# The in-sandbox probe: static, so it runs in any image; its exit code is the errno it met.
$(PROBE): tests/probe/probe.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O2 -Wall -Wextra -Werror -Wno-unused-parameter -static -o $@ $<

# The stamp sits beside the rootfs, not in it: nothing of the build shows inside a sandbox.
$(B)/images/minimal/.built: images/minimal/build.sh $(PROBE)
	images/minimal/build.sh $(MINIMAL) $(PROBE)
	@touch $@

test:
	@scripts/install-deps.sh build test vm
	@$(MAKE) --no-print-directory -j$$(nproc) all $(UNIT_BINS) $(FUZZ_REPLAY)
	@tests/run-all.sh

unit: $(UNIT_BINS)
	@tests/run-all.sh unit

integration: all
	@tests/run-all.sh integration

vmtest: all
	@tests/run-all.sh vm

demo:
	@scripts/install-deps.sh build
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh

bench:
	@scripts/install-deps.sh build bench
	@$(MAKE) --no-print-directory all
	@bench/run.sh

# The scrubber's recall per family, false positives and MB/s (bench/scrub_eval.sh); not in make test.
.PHONY: bench-scrub
bench-scrub:
	@bench/scrub_eval.sh

lint:
	@scripts/install-deps.sh lint
	@$(MAKE) --no-print-directory $(LIB_OBJS) $(GW_SRCS:%.c=$(B)/obj/%.o)
	scripts/check-layout.sh $(B)/obj
	clang-format --dry-run --Werror $(LIB_SRCS) $(MAIN_SRC) $(wildcard */*.h)
	clang-tidy --quiet $(LIB_SRCS) $(MAIN_SRC) -- -std=gnu17 -I. $(PKG_CFLAGS)
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr -I. $(LIB_SRCS) $(MAIN_SRC)

# Fuzz targets (tests/fuzz, docs/fuzzing.md). `make fuzz` builds each with clang's libFuzzer
# and the sanitizers and runs it FUZZ_SECONDS; `make test` replays every kept corpus and
# regression input once through the same targets, built with gcc and a plain main.
FUZZ_TARGETS := policy manifest skill token scrub
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_CFLAGS  := -std=gnu17 -I. -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
                -fno-sanitize-recover=undefined
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(B)/fuzz/fuzz_%)
FUZZ_REPLAY  := $(FUZZ_TARGETS:%=$(B)/fuzz-replay/fuzz_%)

fuzz:
	@scripts/install-deps.sh build fuzz
	@$(MAKE) --no-print-directory -j$$(nproc) $(FUZZ_BINS)
	@FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh $(FUZZ_TARGETS)

$(B)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(PKG_CFLAGS) -c -o $@ $<

$(B)/fuzz/librunbox.a: $(LIB_SRCS:%.c=$(B)/fuzz/obj/%.o)
	rm -f $@ && ar rcs $@ $^

$(B)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(B)/fuzz/librunbox.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(PKG_CFLAGS) -o $@ $< $(B)/fuzz/librunbox.a $(PKG_LIBS)

$(B)/fuzz-replay/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/driver.c tests/fuzz/fuzz.h $(SAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -U_FORTIFY_SOURCE $(PKG_CFLAGS) -o $@ $(filter %.c %.o,$^) $(PKG_LIBS) $(GW_LIBS)

clean:
	rm -rf $(B) runbox runbox-gateway

-include $(shell find $(B) -name '*.d' 2>/dev/null)
