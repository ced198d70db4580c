# simplechain — build, test, bench, install.  `make help` lists the targets.
CC      ?= cc
PREFIX  ?= /usr/local
BUILD   ?= build
OPT     ?= -O3
WARN    := -Wall -Wextra -Wpedantic -Werror
CFLAGS  ?=
CFLAGS  += -std=c11 $(OPT) $(WARN) -pthread -g
LDLIBS  += -lm -pthread
AVX2_FLAGS   := -mavx2 -mfma -ffp-contract=fast -Wno-psabi
AVX512_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mprefer-vector-width=512 -ffp-contract=fast

ARCH := $(shell $(CC) -dumpmachine 2>/dev/null)
ifneq (,$(findstring x86_64,$(ARCH)))
  KERNEL_SRCS := kernels/avx2.c kernels/avx512.c
  KDEFS := -DSC_HAVE_KERNELS
endif

CMOCKA_CFLAGS := $(shell pkg-config --cflags cmocka 2>/dev/null)
CMOCKA_LIBS   := $(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka)

LIB      := $(BUILD)/libsimplechain.a
LIB_OBJS := $(BUILD)/simplechain.o $(KERNEL_SRCS:kernels/%.c=$(BUILD)/kernels/%.o)
EXAMPLES := $(BUILD)/toy2x2
TESTS    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/test_*.c))

.PHONY: all test test-run test-asan bench bench-toy install uninstall clean format lint help deps deps-test demo
all: $(LIB) $(EXAMPLES)

help:
	@echo "make            build the library ($(LIB)) and the examples"
	@echo "make test       build and run the cmocka test suite"
	@echo "make test-asan  the test suite under AddressSanitizer + UBSan (build-asan/)"
	@echo "make bench      simplechain vs its PyTorch twin, side by side (bench/RESULTS.md)"
	@echo "make install    install header and library under PREFIX=$(PREFIX)"
	@echo "make demo       install what is missing, build, train the 2x2 toy"
	@echo "make deps       install the Debian packages the build, tests and benchmarks use"

$(BUILD)/simplechain.o: simplechain.c simplechain.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(KDEFS) -c $< -o $@
$(BUILD)/kernels/avx2.o: kernels/avx2.c kernels/vec_f32.h simplechain.c simplechain.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(AVX2_FLAGS) -c $< -o $@
$(BUILD)/kernels/avx512.o: kernels/avx512.c kernels/vec_f32.h simplechain.c simplechain.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(AVX512_FLAGS) -c $< -o $@
$(LIB): $(LIB_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/%: examples/%.c $(LIB) simplechain.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -I. $< $(LIB) -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/testutil.h $(LIB) simplechain.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(CMOCKA_CFLAGS) -I. $< $(LIB) -o $@ $(CMOCKA_LIBS) $(LDLIBS) \
	  $(if $(findstring test_alloc,$@),-Wl$(comma)--wrap=malloc$(comma)--wrap=calloc$(comma)--wrap=realloc$(comma)--wrap=free)
comma := ,

# Installs cmocka and the compiler if missing (scripts/install-deps.sh: a no-op when present)
deps-test:
	@bash scripts/install-deps.sh test

# Every test binary runs; the exit status is non-zero if any failed.
test: deps-test
	@$(MAKE) --no-print-directory test-run
test-run: $(TESTS) $(EXAMPLES)
	@SC_SRC_DIR=$(CURDIR) SC_BUILD_DIR=$(CURDIR)/$(BUILD) bash scripts/run-tests.sh $(TESTS)

test-asan:
	$(MAKE) --no-print-directory BUILD=build-asan OPT="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all" \
	  LDLIBS="-lm -pthread -fsanitize=address,undefined" test

# The main job: dependencies, build, then train the toy (10,000 full-batch ADAM steps).
demo: deps-test
	@$(MAKE) --no-print-directory all
	./$(BUILD)/toy2x2 --threads $(shell nproc 2>/dev/null || echo 1)

bench: bench-toy
bench-toy: $(BUILD)/toy2x2
	@bash scripts/install-deps.sh bench
	bash bench/bench_toy.sh

install: $(LIB)
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib
	install -m 644 simplechain.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/include/simplechain.h $(DESTDIR)$(PREFIX)/lib/libsimplechain.a

deps:
	bash scripts/install-deps.sh all

format:
	clang-format -i simplechain.c simplechain.h kernels/*.c examples/*.c tests/*.c tests/*.h
lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	  --suppress=missingIncludeSystem --inline-suppr -DSC__TW=16 simplechain.c examples/*.c

clean:
	rm -rf build build-asan
