# simplechain — build, test, bench, install.  `make help` lists the targets.
CC      ?= cc
PREFIX  ?= /usr/local
BUILD   ?= build
OPT     ?= -O3
WARN    := -Wall -Wextra -Wpedantic -Werror
CFLAGS  ?=
CFLAGS  += -std=c11 $(OPT) $(WARN) -pthread -g
LDLIBS  += -lm -pthread
# zlib, for gzipped IDX files (sc_idx_load_images / _labels): on when pkg-config finds it,
# SC_ZLIB=0 turns it off (the loaders then read raw files only and refuse .gz files with
# SC_ERR_UNSUPPORTED). `override`: test-asan sets LDLIBS on the command line, and a library
# compiled with -DSC_HAVE_ZLIB must always be linked with -lz.
ifndef SC_ZLIB
  SC_ZLIB := $(shell pkg-config --exists zlib 2>/dev/null && echo 1 || echo 0)
endif
ifeq ($(SC_ZLIB),1)
  ZLIB_CFLAGS := -DSC_HAVE_ZLIB $(shell pkg-config --cflags zlib 2>/dev/null)
  ZLIB_LIBS   := $(shell pkg-config --libs zlib 2>/dev/null || echo -lz)
endif
CFLAGS  += $(ZLIB_CFLAGS)
override LDLIBS += $(ZLIB_LIBS)
# SLEEF (libsleef-dev): vector exp/log1p/tanh for the AVX2/AVX-512 kernel builds; on when
# its header is installed, SC_SLEEF=0 turns it off (libm is used instead).
ifndef SC_SLEEF
  SC_SLEEF := $(if $(wildcard /usr/include/sleef.h /usr/include/*/sleef.h),1,0)
endif
# SC_TANH=sleef: the float tanh of the AVX2/AVX-512 builds from SLEEF (tanhf u35, 3.5 ULP
# bound) instead of our own (faster, and 1.5 ULP); see bench/RESULTS.md
ifeq ($(SC_SLEEF),1)
  SLEEF_DEFS := -DSC_HAVE_SLEEF $(if $(filter sleef,$(SC_TANH)),-DSC_TANH_SLEEF)
  override LDLIBS += -lsleef
endif
AVX2_FLAGS   := -mavx2 -mfma -ffp-contract=fast -fno-math-errno -Wno-psabi
AVX512_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mprefer-vector-width=512 -ffp-contract=fast -fno-math-errno

ARCH := $(shell $(CC) -dumpmachine 2>/dev/null)
ifneq (,$(findstring x86_64,$(ARCH)))
  KERNEL_SRCS := kernels/avx2/avx2.c kernels/avx512/avx512.c
  KDEFS := -DSC_HAVE_KERNELS
  PEAK_BIN := $(BUILD)/peak
endif
# libxsmm (libxsmm-dev 1.17): JIT-ed GEMMs for the forward of wide dense layers on the
# AVX-512 path (sc__xsmm_plan in simplechain.c says which); on when its header is
# installed and the kernels are built, SC_XSMM=0 turns it off (at run time too). Only
# static libraries ship, and this link order is the one that works.
ifndef SC_XSMM
  SC_XSMM := $(if $(and $(KDEFS),$(wildcard /usr/include/libxsmm.h)),1,0)
endif
ifeq ($(SC_XSMM),1)
  XSMM_DEFS := -DSC_HAVE_XSMM
  override LDLIBS += -lxsmm -lxsmmnoblas -lpthread -lrt -ldl
endif

CMOCKA_CFLAGS := $(shell pkg-config --cflags cmocka 2>/dev/null)
CMOCKA_LIBS   := $(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka)

# The library is built from the source tree (HACKING.md): the engine's rooms in src/, each its
# own translation unit, and one per kernel set in kernels/; -MMD lists each object's headers, so
# that touching a file recompiles the objects that include it. simplechain.c, the drop-in file,
# is generated from the same files (make amalgamation) and built only by the drop-in tests.
ENGINE_SRCS := $(wildcard src/*.c)
LIB      := $(BUILD)/libsimplechain.a
# the bf16 kernels (AVX512_BF16, AMX) carry their targets by pragma and compile to nothing where
# the compiler or the architecture has none; the kernel sets of KERNEL_SRCS get the -m flags
BF16_SRCS := kernels/bf16/bf16.c kernels/amx/amx.c
LIB_OBJS := $(ENGINE_SRCS:%.c=$(BUILD)/%.o) $(BF16_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/sc_nuts.o \
            $(KERNEL_SRCS:%.c=$(BUILD)/%.o)
DEPFLAGS := -MMD -MP
# The shared library: the same sources compiled again as position-independent code in
# $(BUILD)/pic/, linked as libsimplechain.so.MAJOR.MINOR.PATCH with the soname
# libsimplechain.so.MAJOR; simplechain.map exports the sc_* API only (sc__ internals, libxsmm
# linked in statically and everything else stay local). SHARED=0: no shared library.
SHARED  ?= 1
VERSION := $(shell sed -n 's/^\#define SC_VERSION_MAJOR //p' simplechain.h).$(shell sed -n 's/^\#define SC_VERSION_MINOR //p' simplechain.h).$(shell sed -n 's/^\#define SC_VERSION_PATCH //p' simplechain.h)
SOMAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME  := libsimplechain.so.$(SOMAJOR)
SHLIB   := $(BUILD)/libsimplechain.so.$(VERSION)
PIC_OBJS := $(LIB_OBJS:$(BUILD)/%=$(BUILD)/pic/%)
PIC_FLAGS := -fPIC -fno-semantic-interposition
ifeq ($(SHARED),1)
  SHLIBS := $(SHLIB) $(BUILD)/$(SONAME) $(BUILD)/libsimplechain.so
endif
EXAMPLES := $(BUILD)/toy2x2 $(BUILD)/lenet5 $(BUILD)/poisson $(BUILD)/bnn
# examples/neural_ode needs SUNDIALS CVODES and liblbfgs (libsundials-dev, liblbfgs-dev):
# built only where both are installed; SC_NODE=0/1 overrides the detection
ifndef SC_NODE
  SC_NODE := $(if $(and $(wildcard /usr/include/cvodes/cvodes.h),$(wildcard /usr/include/lbfgs.h)),1,0)
endif
NODE_LIBS := -lsundials_cvodes -lsundials_nvecserial -lsundials_sunmatrixdense -lsundials_sunlinsoldense -llbfgs
ifeq ($(SC_NODE),1)
  EXAMPLES += $(BUILD)/neural_ode
endif
# OpenMPI (openmpi-bin, libopenmpi-dev): the MPI binding sc_mpi.c (its own library, so the
# core stays MPI-free) and examples/train_mpi; SC_MPI=0/1 overrides the detection
MPICC ?= mpicc
ifndef SC_MPI
  SC_MPI := $(if $(shell command -v $(MPICC) 2>/dev/null),1,0)
endif
ifeq ($(SC_MPI),1)
  EXAMPLES += $(BUILD)/train_mpi
endif
TESTS    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/test_*.c))
BENCH_BINS := $(BUILD)/micro_valgrad $(BUILD)/small_batch $(BUILD)/ode_rhs $(BUILD)/bnn_grad $(BUILD)/poisson $(BUILD)/bnn $(PEAK_BIN)

.PHONY: FORCE amalgamation check-amalgamation test-aarch64 bench-mpi bench-bayes bench-xsmm bench-xsmm-conv bench-tanh bench-kernels bench-paths bench-bf16-gemm deps-fuzz fuzz fuzz-idx fuzz-params fuzz-npz data all test test-run test-asan bench bench-toy bench-micro bench-peak bench-lenet bench-ode bench-bins install uninstall clean format lint help deps deps-test demo
all: $(LIB) $(SHLIBS) $(EXAMPLES)

help:
	@echo "make            build the library ($(LIB)) and the examples"
	@echo "make test       build and run the cmocka test suite"
	@echo "make test-asan  the test suite under AddressSanitizer + UBSan (build-asan/)"
	@echo "make test-aarch64  simplechain.c cross-built for aarch64, its tests under qemu-user (build-aarch64/)"
	@echo "make bench      everything side by side (bench/bench_all.sh, bench/RESULTS.md): FMA peak,"
	@echo "                toy2x2, valgrad micro-benchmark, LeNet5 (Fashion-MNIST) and neural-ODE RHS/VJP,"
	@echo "                each vs its PyTorch twin, ISA paths, hyperfine (about 20 min; knobs in bench_all.sh)"
	@echo "make bench-toy  toy2x2 vs PyTorch only;  make bench-micro / bench-peak / bench-lenet /"
	@echo "                bench-ode / bench-bayes (BNN gradient, BNN and Poisson sampling): those sections only"
	@echo "make bench-paths every public call on the scalar / AVX2 / AVX-512 paths side by side, \"<<\" where"
	@echo "                a wider path is slower (FILTER=f64, ode, ...: those cases only)"
	@echo "make install    headers, static + shared library, simplechain.pc under PREFIX=$(PREFIX) (SHARED=0: static only);"
	@echo "                make uninstall removes them"
	@echo "make demo       install what is missing, build, train the 2x2 toy"
	@echo "make fuzz       libFuzzer on the IDX, parameter-file, checkpoint and .npz loaders, FUZZ_SECONDS=$(FUZZ_SECONDS) s each (needs clang)"
	@echo "make deps       install the Debian packages the build, tests and benchmarks use"

$(BUILD)/src/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(KDEFS) $(XSMM_DEFS) -c $< -o $@
$(BUILD)/sc_nuts.o: sc_nuts.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DEPFLAGS) -c $< -o $@
$(BUILD)/kernels/bf16/%.o: kernels/bf16/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DEPFLAGS) -c $< -o $@
$(BUILD)/kernels/amx/%.o: kernels/amx/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DEPFLAGS) -c $< -o $@
$(BUILD)/kernels/avx2/%.o: kernels/avx2/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(AVX2_FLAGS) $(SLEEF_DEFS) -c $< -o $@
$(BUILD)/kernels/avx512/%.o: kernels/avx512/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(AVX512_FLAGS) $(SLEEF_DEFS) -c $< -o $@
$(LIB): $(LIB_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/pic/src/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(PIC_FLAGS) $(KDEFS) $(XSMM_DEFS) -c $< -o $@
$(BUILD)/pic/sc_nuts.o: sc_nuts.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(PIC_FLAGS) -c $< -o $@
$(BUILD)/pic/kernels/bf16/%.o: kernels/bf16/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(PIC_FLAGS) -c $< -o $@
$(BUILD)/pic/kernels/amx/%.o: kernels/amx/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(PIC_FLAGS) -c $< -o $@
$(BUILD)/pic/kernels/avx2/%.o: kernels/avx2/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(PIC_FLAGS) $(AVX2_FLAGS) $(SLEEF_DEFS) -c $< -o $@
$(BUILD)/pic/kernels/avx512/%.o: kernels/avx512/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(PIC_FLAGS) $(AVX512_FLAGS) $(SLEEF_DEFS) -c $< -o $@
-include $(LIB_OBJS:.o=.d) $(PIC_OBJS:.o=.d)
$(SHLIB): $(PIC_OBJS) simplechain.map
	$(CC) $(CFLAGS) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=simplechain.map -Wl,-z,defs \
	  $(PIC_OBJS) -o $@ $(LDLIBS)
$(BUILD)/$(SONAME): $(SHLIB)
	ln -sf $(notdir $<) $@
$(BUILD)/libsimplechain.so: $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

# simplechain.pc for pkg-config: the private libraries are those this build links
# (SLEEF, libxsmm, zlib as found above), for `pkg-config --static`. Rewritten on every
# install, for the PREFIX of that install.
FORCE:
PC_LIBS_PRIVATE := $(if $(filter 1,$(SC_SLEEF)),-lsleef) $(if $(filter 1,$(SC_XSMM)),-lxsmm -lxsmmnoblas -lpthread -lrt -ldl) -lm -pthread
$(BUILD)/simplechain.pc: FORCE
	@mkdir -p $(@D)
	@{ echo 'prefix=$(PREFIX)'; echo 'exec_prefix=$${prefix}'; echo 'libdir=$${exec_prefix}/lib'; \
	  echo 'includedir=$${prefix}/include'; echo; echo 'Name: simplechain'; \
	  echo 'Description: small, fast CPU neural-network training engine'; \
	  echo 'Version: $(VERSION)'; echo 'Cflags: -I$${includedir}'; \
	  echo 'Libs: -L$${libdir} -lsimplechain'; echo 'Libs.private: $(strip $(PC_LIBS_PRIVATE))'; \
	  $(if $(filter 1,$(SC_ZLIB)),echo 'Requires.private: zlib';) } > $@.tmp && mv $@.tmp $@

$(BUILD)/%: examples/%.c $(LIB) simplechain.h sc_nuts.h examples/nuts_cli.h examples/bnn_model.h examples/toy_data.h examples/example_util.h examples/lenet_data.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -I. $< $(LIB) -o $@ $(LDLIBS)

$(BUILD)/sc_mpi.o: sc_mpi.c sc_mpi.h simplechain.h
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) -c $< -o $@
$(BUILD)/libsimplechain_mpi.a: $(BUILD)/sc_mpi.o
	@rm -f $@
	$(AR) rcs $@ $^
$(BUILD)/train_mpi: examples/train_mpi.c examples/toy_data.h examples/example_util.h examples/lenet_data.h $(BUILD)/libsimplechain_mpi.a $(LIB) sc_mpi.h simplechain.h
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) -I. $< $(BUILD)/libsimplechain_mpi.a $(LIB) -o $@ $(LDLIBS)

$(BUILD)/neural_ode: examples/neural_ode.c examples/example_util.h $(LIB) simplechain.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -I. $< $(LIB) -o $@ $(NODE_LIBS) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/testutil.h $(LIB) simplechain.h sc_nuts.h examples/bnn_model.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(CMOCKA_CFLAGS) '-DSC_TEST_OPT="$(OPT)"' $(if $(filter 1,$(SC_SLEEF)),-DSC_TEST_SLEEF) $(if $(filter 1,$(SC_XSMM)),-DSC_TEST_XSMM) -I. $< $(LIB) -o $@ $(CMOCKA_LIBS) $(LDLIBS) \
	  $(if $(findstring test_alloc,$@),-Wl$(comma)--wrap=malloc$(comma)--wrap=calloc$(comma)--wrap=realloc$(comma)--wrap=free)
comma := ,

# Installs cmocka and the compiler if missing (scripts/install-deps.sh: a no-op when present)
deps-test:
	@bash scripts/install-deps.sh test

# Every test binary runs; the exit status is non-zero if any failed.
# A plain `make test` builds on every CPU (a `make -jN test` keeps its own N). TEST_SKIP: test
# programs to leave out (test-asan leaves out those whose work is done by other programs that
# the sanitizers do not instrument: test_dropin's apps are built by a plain cc).
NPROC    := $(shell nproc 2>/dev/null || echo 1)
TEST_SKIP ?=
test: deps-test
	@$(MAKE) --no-print-directory $(if $(findstring -j,$(MAKEFLAGS)),,-j$(NPROC)) test-run
test-run: $(TESTS) $(EXAMPLES) $(SHLIBS)
	@SC_SRC_DIR=$(CURDIR) SC_BUILD_DIR=$(CURDIR)/$(BUILD) bash scripts/run-tests.sh \
	  $(filter-out $(TEST_SKIP:%=$(BUILD)/tests/%),$(TESTS))

# The drop-in files on aarch64: cross-built and tested under qemu-user (scripts/test-aarch64.sh)
test-aarch64:
	bash scripts/test-aarch64.sh

test-asan:
	$(MAKE) --no-print-directory BUILD=build-asan SC_XSMM=0 OPT="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all" \
	  LDLIBS="-lm -pthread -fsanitize=address,undefined" TEST_SKIP=test_dropin test

# libFuzzer on the IDX loaders (needs clang and libclang-rt-14-dev: `make deps`). The seeds
# in tests/fuzz_corpus/idx are only read; new inputs go to $(BUILD)/fuzz-corpus/idx and a
# crash to $(BUILD)/fuzz-idx-crash-*. -malloc_limit_mb: no input may make a loader
# allocate from a header's claims.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
# The three harnesses link one instrumented object of the drop-in file, compiled once and with the
# portable kernel set only (-DSC_NO_BUILTIN_AVX2): the loaders they drive are the same code on
# every kernel set, and the built-in AVX2 and AVX-512 sets would make that compile 4x longer
# under the sanitizers (the suite runs those sets under ASan + UBSan: make test-asan).
FUZZ_FLAGS   := -std=c11 -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all $(ZLIB_CFLAGS) -I.
$(BUILD)/fuzz/simplechain.o: simplechain.c simplechain.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -DSC_NO_BUILTIN_AVX2 -c simplechain.c -o $@
$(BUILD)/fuzz_%: tests/fuzz_%.c $(BUILD)/fuzz/simplechain.o simplechain.h
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer $< $(BUILD)/fuzz/simplechain.o -o $@ -lm -pthread $(ZLIB_LIBS)
# fuzz_params (the parameter-file and checkpoint loaders) seeds itself with valid files it writes
# (FUZZ_PARAMS_SEEDS) into $(BUILD)/fuzz-corpus/params-seeds; fuzz_npz (the .npz importer) takes
# NumPy's files in tests/fuzz_corpus/npz and its own exports (FUZZ_NPZ_SEEDS).
deps-fuzz:
	@bash scripts/install-deps.sh fuzz
# (three targets, so that make -j2 fuzz runs two fuzzers at once, as .ci/run does)
fuzz: fuzz-idx fuzz-params fuzz-npz
fuzz-idx: deps-fuzz $(BUILD)/fuzz_idx
	@mkdir -p $(BUILD)/fuzz-corpus/idx
	$(BUILD)/fuzz_idx -max_total_time=$(FUZZ_SECONDS) -malloc_limit_mb=128 -timeout=10 \
	  -artifact_prefix=$(BUILD)/fuzz-idx- $(BUILD)/fuzz-corpus/idx tests/fuzz_corpus/idx
fuzz-params: deps-fuzz $(BUILD)/fuzz_params
	@mkdir -p $(BUILD)/fuzz-corpus/params $(BUILD)/fuzz-corpus/params-seeds
	FUZZ_PARAMS_SEEDS=$(BUILD)/fuzz-corpus/params-seeds $(BUILD)/fuzz_params -runs=0 \
	  $(BUILD)/fuzz-corpus/params-seeds
	$(BUILD)/fuzz_params -max_total_time=$(FUZZ_SECONDS) -malloc_limit_mb=128 -timeout=10 \
	  -artifact_prefix=$(BUILD)/fuzz-params- $(BUILD)/fuzz-corpus/params \
	  $(BUILD)/fuzz-corpus/params-seeds
fuzz-npz: deps-fuzz $(BUILD)/fuzz_npz
	@mkdir -p $(BUILD)/fuzz-corpus/npz $(BUILD)/fuzz-corpus/npz-seeds
	FUZZ_NPZ_SEEDS=$(BUILD)/fuzz-corpus/npz-seeds $(BUILD)/fuzz_npz -runs=0 $(BUILD)/fuzz-corpus/npz-seeds
	$(BUILD)/fuzz_npz -max_total_time=$(FUZZ_SECONDS) -malloc_limit_mb=128 -timeout=10 \
	  -artifact_prefix=$(BUILD)/fuzz-npz- $(BUILD)/fuzz-corpus/npz $(BUILD)/fuzz-corpus/npz-seeds \
	  tests/fuzz_corpus/npz

# The main job: dependencies, build, the toy (10,000 full-batch ADAM steps), LeNet5.
demo:
	bash scripts/demo.sh

# Benchmarks.  build/peak: bench/peak.c compiled three times (the zmm kernel with AVX-512
# flags, the ymm kernel with AVX2 flags, main with the baseline flags; it checks the CPU
# before calling either kernel).
# toy2x2 from the two drop-in files alone, exactly as the README gives the build (no kernels/,
# no make flags): make bench's isa section times it against PyTorch at 1 thread
$(BUILD)/toy2x2-portable: examples/toy2x2.c examples/toy_data.h examples/example_util.h simplechain.c simplechain.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -O2 -I. examples/toy2x2.c simplechain.c -o $@ -lm -pthread
$(BUILD)/micro_valgrad: bench/micro_valgrad.c bench/bench_time.h $(LIB) simplechain.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -I. $< $(LIB) -o $@ $(LDLIBS)
$(BUILD)/api_paths: bench/api_paths.c bench/bench_time.h $(LIB) simplechain.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -I. $< $(LIB) -o $@ $(LDLIBS)
$(BUILD)/small_batch: bench/small_batch.c $(LIB) simplechain.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -I. $< $(LIB) -o $@ $(LDLIBS)
$(BUILD)/ode_rhs: bench/ode_rhs.c bench/bench_time.h $(LIB) simplechain.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -I. $< $(LIB) -o $@ $(LDLIBS)
$(BUILD)/bnn_grad: bench/bnn_grad.c bench/bench_time.h examples/bnn_model.h $(LIB) simplechain.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -I. $< $(LIB) -o $@ $(LDLIBS)
$(BUILD)/bench/peak_avx512.o: bench/peak.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DPEAK_PART=512 -mavx512f -mfma -c $< -o $@
$(BUILD)/bench/peak_avx2.o: bench/peak.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DPEAK_PART=256 -mavx2 -mfma -c $< -o $@
$(BUILD)/bench/peak_main.o: bench/peak.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/peak: $(BUILD)/bench/peak_main.o $(BUILD)/bench/peak_avx512.o $(BUILD)/bench/peak_avx2.o
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
bench-bins: $(BUILD)/toy2x2 $(BUILD)/toy2x2-portable $(BUILD)/lenet5 $(BENCH_BINS) $(if $(filter 1,$(SC_MPI)),$(BUILD)/train_mpi)  # only what the benchmarks run

# One invocation, everything side by side (bench/bench_all.sh; knobs: STEPS, REPS, ...)
bench: bench-bins
	@bash scripts/install-deps.sh bench
	bash bench/bench_all.sh
bench-toy: $(BUILD)/toy2x2
	@bash scripts/install-deps.sh bench
	bash bench/bench_toy.sh
bench-micro: $(BUILD)/micro_valgrad
	@bash scripts/install-deps.sh bench
	SECTIONS=micro bash bench/bench_all.sh
bench-peak: $(PEAK_BIN)
	SECTIONS=peak bash bench/bench_all.sh
bench-lenet: $(BUILD)/lenet5 $(PEAK_BIN)
	@bash scripts/install-deps.sh bench
	SECTIONS="peak lenet" bash bench/bench_all.sh
bench-ode: $(BUILD)/ode_rhs
	@bash scripts/install-deps.sh bench
	SECTIONS=ode bash bench/bench_all.sh
bench-mpi: $(BUILD)/train_mpi
	@bash scripts/install-deps.sh bench
	SECTIONS=mpi bash bench/bench_all.sh
bench-bayes: $(BUILD)/bnn_grad $(BUILD)/poisson $(BUILD)/bnn
	@bash scripts/install-deps.sh bench
	SECTIONS="bnn poisson" bash bench/bench_all.sh

# make install PREFIX=... [DESTDIR=...]: header(s), libsimplechain.a, the shared library with
# its soname and development links (not with SHARED=0), lib/pkgconfig/simplechain.pc, and the
# MPI binding (sc_mpi.h, libsimplechain_mpi.a) where it was built. make uninstall removes
# exactly those files. The .pc is written for PREFIX: install with the PREFIX you built for.
INSTALL_MPI := $(if $(filter 1,$(SC_MPI)),$(BUILD)/libsimplechain_mpi.a)
install: $(LIB) $(SHLIBS) $(INSTALL_MPI) $(BUILD)/simplechain.pc
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 simplechain.h sc_nuts.h $(if $(INSTALL_MPI),sc_mpi.h) $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(LIB) $(INSTALL_MPI) $(DESTDIR)$(PREFIX)/lib/
ifeq ($(SHARED),1)
	install -m 755 $(SHLIB) $(DESTDIR)$(PREFIX)/lib/
	ln -sf $(notdir $(SHLIB)) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libsimplechain.so
endif
	install -m 644 $(BUILD)/simplechain.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/simplechain.pc
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/include/simplechain.h $(DESTDIR)$(PREFIX)/include/sc_nuts.h \
	  $(DESTDIR)$(PREFIX)/include/sc_mpi.h $(DESTDIR)$(PREFIX)/lib/libsimplechain.a \
	  $(DESTDIR)$(PREFIX)/lib/libsimplechain_mpi.a $(DESTDIR)$(PREFIX)/lib/libsimplechain.so \
	  $(DESTDIR)$(PREFIX)/lib/$(SONAME) $(DESTDIR)$(PREFIX)/lib/libsimplechain.so.$(VERSION) \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig/simplechain.pc

# libxsmm against our fused dense kernel on the shapes the examples run (bench/xsmm_dense.c);
# needs libxsmm-dev (`bash scripts/install-deps.sh all`) and an AVX-512 CPU
$(BUILD)/xsmm_dense: bench/xsmm_dense.c bench/bench_time.h simplechain.c simplechain.h kernels/sleef.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -O3 $(AVX512_FLAGS) $(SLEEF_DEFS) -I. $< -o $@ \
	  -lxsmm -lxsmmnoblas -lpthread -lrt -ldl $(LDLIBS)
bench-xsmm: $(BUILD)/xsmm_dense
	./$(BUILD)/xsmm_dense

# a conv forward through libxsmm (im2col + GEMM) against our direct conv on LeNet5's shapes
# (bench/xsmm_conv.c); needs libxsmm-dev; the AVX-512 build where the CPU has it, else AVX2
$(BUILD)/xsmm_conv: bench/xsmm_conv.c bench/bench_time.h simplechain.c simplechain.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -O3 $(AVX512_FLAGS) -I. $< -o $@ -lxsmm -lxsmmnoblas -lpthread -lrt -ldl $(LDLIBS)
$(BUILD)/xsmm_conv_avx2: bench/xsmm_conv.c bench/bench_time.h simplechain.c simplechain.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -O3 $(AVX2_FLAGS) -I. $< -o $@ -lxsmm -lxsmmnoblas -lpthread -lrt -ldl $(LDLIBS)
bench-xsmm-conv: $(BUILD)/xsmm_conv $(BUILD)/xsmm_conv_avx2
	if grep -q avx512f /proc/cpuinfo; then ./$(BUILD)/xsmm_conv; fi
	./$(BUILD)/xsmm_conv_avx2

# our float tanh (both variants) against SLEEF's (bench/tanh_speed.c); needs libsleef-dev;
# the AVX-512 build where the CPU has AVX-512, else the AVX2 one
$(BUILD)/tanh_speed: bench/tanh_speed.c bench/bench_time.h simplechain.c simplechain.h kernels/sleef.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -O3 $(AVX512_FLAGS) -DSC_HAVE_SLEEF -I. $< -o $@ -lsleef $(LDLIBS)
$(BUILD)/tanh_speed_avx2: bench/tanh_speed.c bench/bench_time.h simplechain.c simplechain.h kernels/sleef.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -O3 $(AVX2_FLAGS) -DSC_HAVE_SLEEF -I. $< -o $@ -lsleef $(LDLIBS)
bench-tanh: $(BUILD)/tanh_speed $(BUILD)/tanh_speed_avx2
	if grep -q avx512f /proc/cpuinfo; then ./$(BUILD)/tanh_speed; fi
	./$(BUILD)/tanh_speed_avx2

# the toy's dense kernels one by one (bench/kernels_speed.c): the AVX-512 build where the CPU
# has AVX-512, then the AVX2 build
$(BUILD)/kernels_speed: bench/kernels_speed.c bench/bench_time.h simplechain.c simplechain.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -O3 $(AVX512_FLAGS) -I. $< -o $@ $(LDLIBS)
$(BUILD)/kernels_speed_avx2: bench/kernels_speed.c bench/bench_time.h simplechain.c simplechain.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -O3 $(AVX2_FLAGS) -I. $< -o $@ $(LDLIBS)
bench-kernels: $(BUILD)/kernels_speed $(BUILD)/kernels_speed_avx2
	if grep -q avx512f /proc/cpuinfo; then ./$(BUILD)/kernels_speed; fi
	./$(BUILD)/kernels_speed_avx2

# every public compute call on every kernel path side by side, marking where a wider path is
# slower than a narrower one (bench/api_paths.c; FILTER=substring picks cases)
bench-paths: $(BUILD)/api_paths
	taskset -c 1 ./$(BUILD)/api_paths $(FILTER) 2>/dev/null || ./$(BUILD)/api_paths $(FILTER)

# the bf16 GEMM kernels one by one on LeNet5's shapes (bench/bf16_gemm.c): AVX512_BF16 and,
# where the CPU has AMX-BF16, AMX (baseline flags: the kernels carry their own targets)
$(BUILD)/bf16_gemm: bench/bf16_gemm.c bench/bench_time.h simplechain.c simplechain.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -O3 $(WARN) -pthread $(XSMM_DEFS) -I. $< -o $@ $(LDLIBS)
bench-bf16-gemm: $(BUILD)/bf16_gemm
	./$(BUILD)/bf16_gemm

# simplechain.c, the drop-in file, from the tree (scripts/amalgamate.py); check-amalgamation
# fails when the committed one is stale (CI runs it)
amalgamation:
	python3 scripts/amalgamate.py
check-amalgamation:
	@python3 scripts/amalgamate.py --check && echo "check-amalgamation: simplechain.c is up to date"

deps:
	bash scripts/install-deps.sh all

# MNIST-style data for examples/lenet5 (see scripts/get-data.sh)
data:
	bash scripts/get-data.sh

format:
	clang-format -i simplechain.h sc_nuts.c sc_nuts.h src/*.c src/*.h src/typed/*.h kernels/*.h kernels/*/*.c \
	  kernels/*/*.h examples/*.c tests/*.c tests/*.h bench/*.c
	python3 scripts/amalgamate.py
lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	  --suppress=missingIncludeSystem --inline-suppr -DSC__TW=16 simplechain.c sc_nuts.c examples/*.c

clean:
	rm -rf build build-asan build-aarch64
