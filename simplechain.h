/* simplechain.h — a tiny, fast CPU neural-network training engine.
 *
 * Drop-in use: compile simplechain.c with your program, nothing else is needed:
 *
 *     cc -std=c11 -O2 app.c simplechain.c -lm          (add -pthread for threads)
 *
 * On x86-64 (GCC >= 8, Clang >= 10) that build already carries AVX2 and AVX-512 kernels,
 * chosen at run time from the CPU (-DSC_NO_BUILTIN_AVX512 leaves out the AVX-512 ones: a
 * faster compile). `make` additionally builds kernels/ (the same kernels as separate files)
 * and links libxsmm and SLEEF where installed.
 *
 * ------------------------------------------------------------------------------------
 * Concepts
 * ------------------------------------------------------------------------------------
 * chain      An immutable, validated description of a network (a list of layers and
 *            an input shape) plus its memory plan. Safe to share between threads.
 * p, g       One flat parameter vector and one flat gradient vector of length
 *            sc_chain_nparams(). The caller owns both. Layout: the layers' parameter
 *            blocks one after another, in layer order; see "Parameter layout" below
 *            and sc_chain_summary() for each block's offset.
 * workspace  All scratch memory one thread of computation needs, planned for a
 *            maximum batch size. One workspace per concurrent caller; forward,
 *            valgrad and pullback never allocate.
 * optimizer  ADAM, AdamW or SGD(+momentum) state over the flat vector, also in
 *            caller-owned (or library-allocated) memory.
 *
 * Data layout: samples are contiguous. A batch of B inputs with feature size F is
 * a row-major B x F array (sample b starts at x + b*F); an output batch is B x O.
 *
 * Precision: every compute entry point exists in float (no suffix) and in double
 * (suffix _f64). The same chain and workspace serve both; parameters, inputs and
 * gradients of one call must all be of the same type.
 *
 * Errors: every function returning sc_status validates its arguments. On failure
 * it returns a non-zero code, writes nothing the caller can rely on, and leaves a
 * message naming the problem in sc_last_error() (thread-local). The library never
 * prints (unless you install a progress callback that does), never calls abort or
 * exit, and never allocates inside sc_forward / sc_valgrad / sc_pullback /
 * sc_optimizer_step.
 *
 * ------------------------------------------------------------------------------------
 * Parameter layout (stable: saved parameter files depend on it)
 * ------------------------------------------------------------------------------------
 * dense(O) on an input of I features:  W as O x I row-major (W[o*I + i]), then, if the
 *                                      layer has a bias, b[0..O).
 *                                      y[o] = act( sum_i W[o*I+i] x[i] + b[o] )
 * conv2d(kh, kw, K) on C x H x W:      W as K x C x kh x kw (PyTorch's order:
 *                                      W[((k*C + c)*kh + i)*kw + j]), then b[0..K).
 *                                      y[k][u][v] = act( b[k] + sum_{c,i,j}
 *                                        W[k][c][i][j] x[c][u*sh + i - ph][v*sw + j - pw] )
 *                                      (x is 0 outside the image)
 * maxpool2d, flatten, dropout:         no parameters.
 *
 * ------------------------------------------------------------------------------------
 * Activations (documented exactly, since gradients depend on the definitions)
 * ------------------------------------------------------------------------------------
 * SC_IDENTITY  z
 * SC_RELU      max(z, 0); derivative taken as 0 at z == 0
 * SC_TANH      tanh(z)
 * SC_SIGMOID   1 / (1 + exp(-z))
 * SC_SOFTPLUS  log(1 + exp(z)), computed stably
 * SC_GELU      the tanh approximation 0.5 z (1 + tanh(u)), u = sqrt(2/pi) (z + 0.044715 z^3),
 *              evaluated as z / (1 + exp(-2u)) (the same function, accurate in the tail)
 * SC_SILU      z sigmoid(z) = z / (1 + exp(-z)) (also called swish); derivative
 *              sigmoid(z) (1 + z (1 - sigmoid(z))). Like gelu it keeps the pre-activation z
 *              for the pullback (one more tile row per output in the workspace)
 *
 * The float path evaluates tanh with the library's own vectorizable approximation
 * (an expm1 with its own range reduction, and an odd polynomial near 0), exactly +-1 for
 * |z| >= 9 and never outside [-1, 1]; max error 1.5 ULP, measured by tests/test_math.c
 * (SLEEF's tanhf u35: 2.49 ULP there). The double path's tanh is the library's own too, the
 * same method in double (every kernel set, and the one-state entry points): exactly +-1 for
 * |z| >= 19.1, odd, never outside [-1, 1]; max error bounded by 2 ULP in tests/test_math.c
 * (1.48 measured against long double; SLEEF's u10 tanh, used before, is 1 ULP and 1.9x slower).
 */
#ifndef SIMPLECHAIN_H
#define SIMPLECHAIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SC_VERSION_MAJOR 0
#define SC_VERSION_MINOR 1
#define SC_VERSION_PATCH 0

/* ---------------------------------------------------------------- status codes */
typedef enum sc_status {
  SC_OK = 0,
  SC_ERR_NULL,        /* a required pointer argument was NULL */
  SC_ERR_ARG,         /* an argument is out of its documented range */
  SC_ERR_SHAPE,       /* shapes do not fit together */
  SC_ERR_OVERFLOW,    /* a size computation would overflow size_t */
  SC_ERR_NOMEM,       /* memory allocation failed, or caller memory too small */
  SC_ERR_NONFINITE,   /* NaN or Inf in an input, target or parameter */
  SC_ERR_BATCH,       /* batch size is 0 or larger than the workspace allows */
  SC_ERR_IO,          /* a file could not be read or written */
  SC_ERR_FORMAT,      /* a file is malformed or truncated */
  SC_ERR_UNSUPPORTED, /* a valid request this build or CPU cannot serve */
  SC_ERR_THREAD,      /* a thread could not be created */
  SC_ERR_STOPPED,     /* the progress callback asked training to stop */
  SC_ERR_CALLBACK     /* a user callback reported an error (sc_nuts.h) */
} sc_status;

/* A short, static, human-readable name for a status code ("SC_ERR_SHAPE", ...). */
const char *sc_status_str(sc_status s);

/* The message of the last failure in the calling thread: names the function and the
 * problem, e.g. "sc_chain_create: layer 2 (dense): outputs must be > 0". Never NULL;
 * "" when nothing failed yet. The pointer stays valid until the next failing call in
 * the same thread. */
const char *sc_last_error(void);

/* For code built on the library (the modules beside it, such as sc_nuts.c, or a caller's
 * own wrappers): records "fn: <message>" as the calling thread's sc_last_error() and
 * returns st, so that such code reports errors exactly as the library does. fn may be
 * NULL (no prefix); fmt is a printf format. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
sc_status
sc_set_error(sc_status st, const char *fn, const char *fmt, ...);

/* ---------------------------------------------------------------- layers */
typedef enum sc_act {
  SC_IDENTITY = 0,
  SC_RELU,
  SC_TANH,
  SC_SIGMOID,
  SC_SOFTPLUS,
  SC_GELU,
  SC_SILU
} sc_act;

typedef enum sc_layer_kind {
  SC_LAYER_DENSE = 1,
  SC_LAYER_CONV2D,
  SC_LAYER_MAXPOOL2D,
  SC_LAYER_FLATTEN,
  SC_LAYER_DROPOUT
} sc_layer_kind;

/* A layer is a small value. Build it with the constructors below; the fields are
 * public so that tables of layers can be written as initializers, but a chain only
 * accepts combinations the constructors can produce: a field the layer's kind does not
 * use must be 0 (act: SC_IDENTITY), and a maxpool's stride must equal its window;
 * anything else is SC_ERR_ARG naming the layer and the field. */
typedef struct sc_layer {
  sc_layer_kind kind;
  sc_act act;
  size_t outputs; /* dense: output features; conv2d: output channels */
  int bias;       /* dense, conv2d: 1 = with bias, 0 = without */
  size_t kh, kw;  /* conv2d: kernel size; maxpool2d: window */
  size_t sh, sw;  /* conv2d, maxpool2d: stride */
  size_t ph, pw;  /* conv2d: zero padding on each side */
  double rate;    /* dropout: probability of dropping an element, in [0, 1) */
} sc_layer;

/* Shapes. A sample is a C x H x W array (NCHW order within a batch: sample b starts at
 * x + b*C*H*W, element (c, y, x) at ((c*H + y)*W + x)). A plain feature vector of F
 * values is F x 1 x 1. */
sc_layer sc_dense(size_t outputs, sc_act act);        /* with bias; needs a 1 x 1 input */
sc_layer sc_dense_nobias(size_t outputs, sc_act act); /* without bias */
/* 2-D cross-correlation (like PyTorch's Conv2d), stride 1, no padding ("valid"), with
 * bias: C x H x W -> channels x (H-kh+1) x (W-kw+1). */
sc_layer sc_conv2d(size_t kh, size_t kw, size_t channels, sc_act act);
/* The same with strides and zero padding: output H' = (H + 2 ph - kh) / sh + 1. The
 * padding must be smaller than the kernel (ph < kh, pw < kw: a wider border would add
 * outputs that see only zeros) and the strides at least 1; the kernel must fit in the
 * padded input. Otherwise sc_chain_create fails with SC_ERR_SHAPE naming the layer. */
sc_layer sc_conv2d_ex(size_t kh, size_t kw, size_t channels, sc_act act, size_t sh, size_t sw,
                      size_t ph, size_t pw);
/* The same without bias (like Conv2d(..., bias=False)): its parameters are the weights
 * alone, channels x C x kh x kw. With bias (the two constructors above) the weights are
 * followed by the channels biases. */
sc_layer sc_conv2d_nobias(size_t kh, size_t kw, size_t channels, sc_act act, size_t sh, size_t sw,
                          size_t ph, size_t pw);
/* Max over non-overlapping kh x kw windows (stride = window): H' = H / kh (rounded
 * down; trailing rows/columns that fill no window are ignored). The gradient goes to the
 * first maximal element of each window. On the AVX2 and AVX-512 float kernels a 2 x 2 pool's
 * pullback over a relu or identity conv2d whose output its windows tile exactly is done in
 * one pass with that conv's activation pullback and bias gradient, and (float precision) the
 * pool's forward is done by the conv's forward, which then never stores its own output (the
 * same bits; the environment variable SC_POOL_FUSE=0, read by sc_chain_create, turns both
 * off, =1 or unset is the default, any other value makes chain creation fail with
 * SC_ERR_ARG). */
sc_layer sc_maxpool2d(size_t kh, size_t kw);
/* C x H x W -> (C*H*W) x 1 x 1, in NCHW order (as torch.flatten). Costs nothing. */
sc_layer sc_flatten(void);
/* Inverted dropout: in training (sc_valgrad, sc_train) each element is kept with
 * probability 1 - rate and scaled by 1 / (1 - rate); elsewhere (sc_forward,
 * sc_loss_value, sc_pullback, sc_evaluate) it is the identity. The mask depends only on
 * the workspace's dropout seed and step (sc_workspace_set_dropout), the sample's position
 * in the batch and the element, never on threads. */
sc_layer sc_dropout(double rate);

/* Name of a layer kind ("dense", "conv2d", ...) or "?" */
const char *sc_layer_name(sc_layer_kind kind);

/* Name of an activation ("tanh", ...) or "?" for an unknown value. */
const char *sc_act_name(sc_act act);

/* ---------------------------------------------------------------- chains */
typedef struct sc_chain sc_chain;

/* Validates the layer list against the per-sample input size and plans memory.
 * input_features: number of features of one input sample (> 0), i.e. an input shape of
 * input_features x 1 x 1. On success *out owns a new chain (free: sc_chain_destroy). */
sc_status sc_chain_create(sc_chain **out, size_t input_features, const sc_layer *layers,
                          size_t nlayers);
/* The same for image inputs of channels x height x width (NCHW, see above). */
sc_status sc_chain_create_image(sc_chain **out, size_t channels, size_t height, size_t width,
                                const sc_layer *layers, size_t nlayers);
void sc_chain_destroy(sc_chain *chain); /* NULL is fine */

sc_status sc_chain_nparams(const sc_chain *chain, size_t *nparams);
/* features of one input / output sample (C*H*W) */
sc_status sc_chain_input_size(const sc_chain *chain, size_t *features);
sc_status sc_chain_output_size(const sc_chain *chain, size_t *features);
sc_status sc_chain_nlayers(const sc_chain *chain, size_t *nlayers);

/* Per-layer facts, for tooling: index in [0, nlayers). */
typedef struct sc_layer_info {
  sc_layer layer;
  size_t inputs;       /* features in (C*H*W) */
  size_t outputs;      /* features out */
  size_t in_shape[3];  /* C, H, W */
  size_t out_shape[3]; /* C, H, W */
  size_t nparams;      /* parameters of this layer */
  size_t param_offset; /* where they start in p */
} sc_layer_info;
sc_status sc_chain_layer_info(const sc_chain *chain, size_t index, sc_layer_info *info);

/* Writes a per-layer table (layer, activation, output shape, parameter count and
 * offset in p) into buf, always NUL-terminated when cap > 0. *needed (if not NULL)
 * receives the full length + 1, so a caller may size the buffer with a first call
 * with buf = NULL, cap = 0. Returns SC_ERR_NOMEM if the table was truncated. */
sc_status sc_chain_summary(const sc_chain *chain, char *buf, size_t cap, size_t *needed);

/* Name of the kernel set this chain uses: "scalar", "avx2" or "avx512". The choice is
 * made at sc_chain_create from the CPU and the SC_ISA environment variable
 * (SC_ISA=scalar|avx2|avx512 forces a path; a path the CPU or build lacks is an
 * SC_ERR_UNSUPPORTED error at sc_chain_create; "auto" or unset picks the widest). Beside
 * it, SC_XSMM=0 keeps libxsmm out of a build that has it (its GEMM is one of the dense
 * forward variants: see sc_chain_plan below for SC_PLAN, SC_WISDOM, SC_DENSE_FWD), and
 * SC_PIN=0 leaves pool threads unpinned (sc_workspace_set_threads). All are read at
 * sc_chain_create (SC_PIN: at sc_workspace_set_threads). */
const char *sc_chain_isa(const sc_chain *chain);

/* Kernel variants. The dense layers' float forward has two variants on the SIMD kernel
 * sets when the build has libxsmm: "fused" (ours: GEMM, bias and activation in one pass)
 * and "xsmm" (libxsmm's JIT GEMM, then a bias/activation pass). sc_chain_create picks one
 * per layer:
 *   SC_PLAN=rules (default): by a rule from measurements (xsmm on the AVX-512 kernels from
 *     64 inputs up, fused elsewhere; bench/RESULTS.md);
 *   SC_PLAN=measure: by timing both on this machine (a few milliseconds per dense layer);
 *     with SC_WISDOM=path the answers are saved to and read from that text file, keyed by
 *     CPU model, kernel set and layer shape (a file that is not a wisdom file is ignored,
 *     left as it is, and named in the plan's note);
 *   SC_DENSE_FWD=fused|xsmm: forced (xsmm where unavailable: SC_ERR_UNSUPPORTED).
 * A dense tanh layer's float forward on the SIMD kernel sets has two variants of tanh's
 * final quotient too: "div" (a divide) and "rcp" (a reciprocal estimate with Newton
 * corrections: no divide instruction, which issues slowly on some CPUs); both within
 * 1.5 ULP. The same SC_PLAN / SC_WISDOM apply (rule: div, measured faster on the AMD hosts;
 * bench/RESULTS.md); SC_TANH_VARIANT=div|rcp forces one (rcp on the scalar kernels:
 * SC_ERR_UNSUPPORTED). Opt-in, a faster and less accurate tanh: a rational function
 * x P(x^2) / Q(x^2) with the same two quotients, "rat" and "ratrcp": max error 6 ULP (5.41
 * measured; SLEEF's tanhf u35: 2.49), odd, in [-1, 1], exactly +-1 from |x| = 9.125; about
 * 1.8x faster than div on an AVX2 EPYC. SC_TANH_VARIANT=rat|ratrcp forces one,
 * SC_TANH_VARIANT=fast lets the planner choose among all four (rule: rat; SC_PLAN=measure
 * times all four). Conv layers, the double API and the one-sample entry points
 * (sc_vjp, sc_jvp, ...) use the divide form.
 * A float conv layer on the SIMD kernel sets has three register-block shapes for its forward
 * (output channels x output columns: AVX2 2x1, 1x3, 3x1; AVX-512 4x2, 6x2, 8x1) and three for
 * its weight gradient (channels x taps: AVX2 3x3, 2x4, 4x2; AVX-512 4x4, 6x4, 8x2). Every
 * shape keeps every sum in the same order, so all give the same bits. The rule takes the
 * first of each (measured best on LeNet5), but for the weight gradient of a layer whose channels
 * are a multiple of 6 and not of 4 on AVX-512: 6x4 (LeNet5's first conv, 9 % faster on an AMD
 * Zen 4 than 4x4's blocks of 4 + 2 channels); SC_PLAN=measure times them (the forward with
 * sc_forward, then the dW blocks with sc_valgrad on a one-layer twin) and SC_WISDOM keeps the
 * answer ("conv" entries keyed by input shape, channels, kernel, stride, padding, activation
 * and bias); SC_CONV_FWD=shape and SC_CONV_DW=shape force one (the other keeps the rule's; a
 * shape the kernel set lacks, or any on the scalar kernels: SC_ERR_UNSUPPORTED). In builds
 * with libxsmm the conv forward has a fourth candidate, "xsmm": per output row an im2col copy
 * of the row's taps (workspace memory: taps x output width x 32 floats per conv layer and
 * slice) and one libxsmm GEMM for every channel, then bias and activation; SC_PLAN=measure
 * times it against the fastest block, SC_CONV_FWD=xsmm forces it (never by rule: it measured
 * slower on the AVX2 host; it may differ from the blocks in the last bits). A float relu or
 * identity conv with a 2 x 2 sc_maxpool2d above it whose windows tile its output computes that
 * pool in its forward (see sc_maxpool2d: blocks of its own, the same bits as every block
 * shape), so its forward block choice does not apply there; with "xsmm" it is not folded.
 * The weight gradient of a dense layer small enough for lane accumulators (at most 1024
 * weights: 32 partial sums per weight, summed once per slice) has a second form, "dot" (the
 * input tile transposed, then one dot product per weight, as larger layers always do). Rule:
 * lane (measured faster on the AVX2 host for every toy, micro and ODE layer: 1.3-3.4x);
 * SC_PLAN=measure times both (sc_valgrad on a one-layer twin; "dense_dw" wisdom entries);
 * SC_DENSE_DW=lane|dot forces one. This one applies to every kernel set, float and double.
 * Bad values are SC_ERR_ARG at sc_chain_create. The choice belongs to the chain: results do
 * not depend on the thread count; the variants may differ from each other in the last bits.
 * sc_chain_plan writes what was chosen, how, and the timings, as sc_chain_summary writes. */
sc_status sc_chain_plan(const sc_chain *chain, char *buf, size_t cap, size_t *needed);

/* ---------------------------------------------------------------- parameters */
/* Glorot-uniform weights, U(-a, a) with a = sqrt(6 / (fan_in + fan_out)); biases 0.
 * Deterministic for a seed and identical on every machine (own PRNG, no libm in the
 * draw). n must equal sc_chain_nparams(). */
sc_status sc_params_init(const sc_chain *chain, float *p, size_t n, uint64_t seed);
sc_status sc_params_init_f64(const sc_chain *chain, double *p, size_t n, uint64_t seed);

/* Parameter files: a small versioned binary format, little-endian on every machine:
 *   bytes  0..7   magic "SCPARAMS"
 *   bytes  8..11  format version (1)          bytes 12..15  element type (1 = float32,
 *                                                                       2 = float64)
 *   bytes 16..23  parameter count n           bytes 24..31  chain fingerprint
 *   then n values of that type, then an 8-byte FNV-1a checksum of those value bytes.
 * sc_params_save writes float32, sc_params_save_f64 float64 (a neural-ODE user trains and
 * saves in double with no conversion). Both loaders read both types: sc_params_load_f64
 * widens float32 exactly; sc_params_load rounds float64 to nearest, and a value beyond
 * float range is SC_ERR_NONFINITE naming it.
 * The fingerprint hashes the input size and every layer (kind, outputs, activation,
 * bias), so a file only loads into a chain of the same shape.
 * Saving is atomic: the file is written under a temporary name of its own in the same
 * directory ("<path>.tmp-<pid>-<n>-<clock>", created exclusively, so concurrent savers
 * never share one), synced to the disk (fsync), renamed over path, and the directory is
 * synced. After a crash or power cut path holds either the old or the new file, whole;
 * two processes saving to one path leave one of the two files, whole. On any error the
 * temporary file is removed and path is untouched. Saving refuses NaN or Inf parameters
 * (SC_ERR_NONFINITE naming the element; nothing is written), since loading would.
 * Loading checks every field and names the problem and the byte offset on failure;
 * it writes p only when the whole file is valid.
 * Errors: SC_ERR_IO when a file cannot be opened, read, written or renamed (a directory
 * included), naming the path and the system's reason; SC_ERR_NOMEM when memory runs out
 * (in the C library's fopen too); SC_ERR_FORMAT / SC_ERR_SHAPE / SC_ERR_NONFINITE for the
 * contents. */
sc_status sc_params_save(const sc_chain *chain, const float *p, size_t n, const char *path);
sc_status sc_params_load(const sc_chain *chain, float *p, size_t n, const char *path);
sc_status sc_params_save_f64(const sc_chain *chain, const double *p, size_t n, const char *path);
sc_status sc_params_load_f64(const sc_chain *chain, double *p, size_t n, const char *path);

/* NumPy / PyTorch files (.npz). The export writes one array per parameter block, with its
 * real shape, named as the state_dict of the torch.nn.Sequential that matches the chain:
 *
 *   dense(O) on I features       -> nn.Linear(I, O[, bias=False])   "i.weight" O x I, "i.bias" O
 *   conv2d_ex(kh, kw, K, .., sh, sw, ph, pw) on C channels
 *                                -> nn.Conv2d(C, K, (kh, kw), stride=(sh, sw), padding=(ph, pw)
 *                                   [, bias=False])          "i.weight" K x C x kh x kw, "i.bias" K
 *   an activation other than SC_IDENTITY after a dense or conv layer -> the next module:
 *                                   nn.ReLU, nn.Tanh, nn.Sigmoid, nn.Softplus,
 *                                   nn.GELU(approximate="tanh"), nn.SiLU
 *   maxpool2d(kh, kw)            -> nn.MaxPool2d((kh, kw))
 *   flatten                      -> nn.Flatten()
 *   dropout(rate)                -> nn.Dropout(rate)
 *
 * where i counts the modules from 0. So LeNet5 (conv relu, pool, conv relu, pool, flatten,
 * dense relu, dense relu, dense) gives 0.weight, 0.bias, 3.weight, 3.bias, 7.weight, ...,
 * and in Python
 *   model.load_state_dict({k: torch.from_numpy(v) for k, v in np.load(path).items()})
 * loads it (tests/npz_check.py builds the Sequential from the chain and compares the
 * forward passes). sc_params_export_npz writes float32 arrays ('<f4'), the _f64 form
 * float64 ('<f8'); the archive is "stored" (np.savez's form, no zlib needed), written
 * atomically like sc_params_save, and refuses NaN/Inf parameters (SC_ERR_NONFINITE).
 *
 * The import reads such a file: every array of the chain exactly once, no other entry;
 * float32 or float64 little- or big-endian values (converted to the type of p; a float64
 * beyond float range is SC_ERR_NONFINITE); shapes as above (SC_ERR_SHAPE naming the array
 * and both shapes); C order (a Fortran-ordered array with more than one dimension above 1
 * is SC_ERR_FORMAT); stored or deflated entries (np.savez_compressed; deflate needs a build
 * with zlib, SC_ERR_UNSUPPORTED otherwise). An entry may not claim more bytes than its
 * shape can need (8 per value and a 64 KiB header), so a zip bomb is refused before any
 * memory is taken for it; every CRC is checked. Zip64 archives (over 4 GiB or 65535
 * arrays) are SC_ERR_UNSUPPORTED. p is written only when the whole file is valid. Errors
 * name the file and the array. */
sc_status sc_params_export_npz(const sc_chain *chain, const float *p, size_t n, const char *path);
sc_status sc_params_export_npz_f64(const sc_chain *chain, const double *p, size_t n,
                                   const char *path);
sc_status sc_params_import_npz(const sc_chain *chain, float *p, size_t n, const char *path);
sc_status sc_params_import_npz_f64(const sc_chain *chain, double *p, size_t n, const char *path);

/* ---------------------------------------------------------------- workspaces */
typedef struct sc_workspace sc_workspace;

/* Bytes a workspace for batches of up to max_batch samples needs (including its
 * bookkeeping and alignment slack), for sc_workspace_init. */
sc_status sc_workspace_bytes(const sc_chain *chain, size_t max_batch, size_t *bytes);

/* Library-allocated workspace. Free with sc_workspace_destroy. */
sc_status sc_workspace_create(sc_workspace **out, const sc_chain *chain, size_t max_batch);

/* Workspace in caller memory (any alignment, at least sc_workspace_bytes bytes). The
 * caller frees mem after it is done with the workspace; do not call
 * sc_workspace_destroy on it unless threads were set (it then stops them). */
sc_status sc_workspace_init(sc_workspace **out, const sc_chain *chain, size_t max_batch, void *mem,
                            size_t bytes);

/* Use `threads` threads (>= 1) for the calls made with this workspace. Threads are
 * created here, once, and kept until the workspace is destroyed or this is called
 * again. Results do not depend on the thread count: a batch is cut into slices that
 * depend only on the batch size, each slice accumulates its own gradient, and the
 * slices are summed in a fixed order. A batch of one slice (up to 128 samples for small
 * dense chains, 32 for convnets) runs on the calling thread alone: waking workers for it
 * cost more than it gave. On Linux the workers are pinned, worker k to the k-th CPU
 * (cyclically) of those the process may use. The calling thread is not pinned, but a call
 * that finds it on a worker's CPU moves it to the first of those CPUs, which no worker holds
 * (at most once a millisecond, and only where its own affinity allows that CPU; its affinity
 * is left as it was): a worker sharing its CPU with the caller waits for the caller's share.
 * SC_PIN=0 in the environment turns both off (do so when several multi-threaded processes
 * share the CPUs, e.g. MPI ranks started with --bind-to none). Between calls an idle worker polls
 * for the next one, yielding the CPU between polls, for up to 1 ms before it sleeps, so that the
 * serial part of a training step does not cost a wake-up. Returns SC_ERR_UNSUPPORTED when the
 * library was built without threads (SC_NO_THREADS). */
sc_status sc_workspace_set_threads(sc_workspace *ws, int threads);

void sc_workspace_destroy(sc_workspace *ws); /* NULL is fine */

/* Per-layer profile of the calls made with ws (sc_forward, sc_valgrad, sc_pullback, ...):
 * on = 1 zeroes the counters and starts counting (the first start allocates them; a
 * workspace in caller memory that was profiled must then be passed to
 * sc_workspace_destroy), on = 0 stops. Counting reads a clock per layer and tile, and
 * changes no result. Calls on the small-batch path (see sc_valgrad) and the one-state
 * calls (sc_apply, ...) are not counted. */
sc_status sc_workspace_profile(sc_workspace *ws, int on);

/* What a layer cost: seconds are thread-seconds (summed over the threads that ran it, so
 * a layer run on 2 threads for 1 s of wall time shows 2 s); flop are the floating-point
 * operations of its matrix work (2 per multiply-add: dense and conv forward; backward
 * dW, plus dx above layer 0), 0 for the others; GFLOP/s per thread = flop / seconds. */
typedef struct sc_layer_profile {
  double fwd_seconds, bwd_seconds;
  double fwd_flop, bwd_flop;
} sc_layer_profile;

/* The counters so far: rows[l] for layer l, rows[nlayers] for the rest of the calls' work
 * (gathering the batch, the loss, folding the slices' gradients); nrows >= nlayers + 1
 * (later rows are zeroed). The fused pullback of a dense layer into the one below puts
 * the lower layer's activation derivative into the upper layer's backward time (and a
 * fused 2 x 2 max-pool's pullback the conv's below it, see sc_maxpool2d); with the
 * AVX512_BF16 kernels a 2 x 2 max-pooling's pullback is done by the conv layer below it, so
 * its backward time shows in that conv's row (the pool's row is then near 0). */
sc_status sc_workspace_profile_read(const sc_workspace *ws, sc_layer_profile *rows, size_t nrows);

/* The rows as a table, one line per row (layer, fwd ms, GFLOP/s, bwd ms, GFLOP/s, share of
 * the total), written into buf as sc_chain_summary does (size it with buf = NULL, cap = 0;
 * SC_ERR_NOMEM when truncated). Row nlayers + 1, if given, is named "(optimizer, guard)":
 * sc_train fills it. */
sc_status sc_profile_table(const sc_chain *chain, const sc_layer_profile *rows, size_t nrows,
                           char *buf, size_t cap, size_t *needed);

/* ---------------------------------------------------------------- precision (bfloat16)
 * The float calls of a workspace (sc_forward, sc_valgrad, sc_pullback, sc_loss_value,
 * sc_evaluate, sc_train) compute in one of these precisions. The double calls and the
 * one-state calls (sc_apply, sc_vjp, sc_jvp) always compute in their own type.
 *   SC_PRECISION_FP32 (the default): float throughout.
 *   SC_PRECISION_BF16: the operands of the matrix work of dense and conv layers (the
 *     weights, each layer's input, and in the pullback the activation gradient, after the
 *     bias gradient is taken) are rounded to bfloat16, their products accumulated in float.
 *     A layer output that feeds another layer is rounded where it is stored, so that
 *     layer's activation derivative is taken from the rounded value. Master parameters,
 *     gradients, optimizer state, biases, the last layer's outputs and the losses stay
 *     float. The dense and conv layers' products run as bf16 GEMMs (vdpbf16ps: pairs of
 *     bf16 products added to a float; a conv layer one GEMM per output row). Needs
 *     AVX512_BF16; SC_ERR_UNSUPPORTED on a CPU without it (AMD Zen 4 and later, Intel
 *     Cooper Lake, Sapphire Rapids and later have it). Where the CPU also has AMX-BF16
 *     (Intel Sapphire Rapids and later, Linux on x86-64, built with GCC 11 or clang 12 or
 *     later) the products run on AMX tiles by default; elsewhere on the AVX512_BF16 kernels.
 *     The environment variable SC_BF16_KERNELS overrides the choice: =native the
 *     AVX512_BF16 kernels; =amx the AMX tiles (SC_ERR_UNSUPPORTED where they are not,
 *     naming why); =model a portable model of the AVX512_BF16 kernels on any CPU (slow: it
 *     is what the tests compare the kernels with, and the kernels give its bits);
 *     =amx-model the AMX blocking on a portable model of the tiles, on any CPU.
 *     AMX may add a pair's two products in another order than
 *     vdpbf16ps (Intel documents two), so its results may differ in the last bits from the
 *     AVX512_BF16 kernels'; across thread counts they stay the same. Any other value of
 *     SC_BF16_KERNELS is SC_ERR_ARG. A conv layer's products avoid im2col where they can (stride
 *     1): dW reads the input's pairs in place (on AVX512_BF16 as dot products when the layer has
 *     fewer than 16 output channels), dx is added into the input in place (on AVX512_BF16
 *     each input position's sum over its taps at once, a correlation), and the forward reads
 *     the input packed once as pairs of channels (on AMX; on AVX512_BF16 where the input has an
 *     even number of channels, else as pairs of neighbouring columns when the layer has fewer
 *     than 16 output channels). With strides, and always on AMX,
 *     the pullback (dW, dx) of a conv layer with fewer than 8 output channels runs on the float
 *     kernels instead, on the same rounded operands (its packing for the GEMM costs more than the
 *     pullback in float: LeNet5's first conv), and on AMX its forward too; SC_BF16_LAYERS=all puts
 *     every conv layer on the bf16 GEMM, =auto (or unset) is this default, any other value is
 *     SC_ERR_ARG. On the AVX512_BF16 kernels a 2 x 2 max-pooling layer right above a conv layer
 *     (relu or identity, an even output of at least 4 rows, forward on pairs read in place) is
 *     folded into the conv's forward, which then keeps only the pooled output and each window's
 *     first maximum for the pullback (the same bits; the pool's own profile rows show about
 *     0); SC_BF16_POOL_FOLD=0 turns that off, =1 (or unset) is the default, any other value is
 *     SC_ERR_ARG.
 *   SC_PRECISION_BF16_EMULATED: the same rounding of the same operands, computed by the float
 *     kernels on any CPU. A product of two bfloat16 numbers is exact in float (unless it
 *     overflows: the bf16 kernels add it unrounded, as VDPBF16PS's FMAs do), so this gives
 *     the bf16 kernels' results up to the order of the float additions: the reference the
 *     bf16 kernels are tested against, and a way to check that a model trains in bf16 before
 *     moving it to such a CPU. It is no faster than fp32 (a little slower).
 * Rounding is to nearest, ties to even, as VCVTNEPS2BF16 does it (sc_bf16_from_float): float
 * denormals become zeros of their sign, infinities stay, a NaN stays a (quiet) NaN. Results
 * stay bitwise identical across thread counts. The first switch to a bf16 precision
 * allocates a parameter-sized buffer, and the first switch to SC_PRECISION_BF16 the kernels'
 * packed weights and per-slice operand buffers (SC_ERR_NOMEM if that fails; a workspace in
 * caller memory must then be passed to sc_workspace_destroy). */
typedef enum sc_precision {
  SC_PRECISION_FP32 = 0,
  SC_PRECISION_BF16 = 1,
  SC_PRECISION_BF16_EMULATED = 2
} sc_precision;

sc_status sc_workspace_set_precision(sc_workspace *ws, sc_precision precision);
/* The workspace's precision into *precision. */
sc_status sc_workspace_precision(const sc_workspace *ws, sc_precision *precision);
/* "fp32", "bf16", "bf16-emulated"; NULL for a value that is none of them. */
const char *sc_precision_name(sc_precision precision);

/* float <-> bfloat16 bits (the upper 16 bits of a float), round to nearest even as above;
 * sc_float_from_bf16 is exact. */
uint16_t sc_bf16_from_float(float x);
float sc_float_from_bf16(uint16_t b);

/* Dropout masks of the next sc_valgrad call are drawn from (seed, step); every
 * sc_valgrad call then advances step by one. A new workspace starts at (0, 0).
 * sc_train sets them from its options. */
sc_status sc_workspace_set_dropout(sc_workspace *ws, uint64_t seed, uint64_t step);

/* ---------------------------------------------------------------- compute */
/* y (batch x outputs) = chain(x (batch x inputs); p).  1 <= batch <= max_batch. */
sc_status sc_forward(const sc_chain *chain, const float *p, const float *x, size_t batch, float *y,
                     sc_workspace *ws);
sc_status sc_forward_f64(const sc_chain *chain, const double *p, const double *x, size_t batch,
                         double *y, sc_workspace *ws);

typedef enum sc_loss {
  /* L = (1/B) sum_b sum_j (yhat_bj - t_bj)^2      target: B x outputs values.
   *     Summed over the outputs, averaged over the batch: outputs x torch's MSELoss()
   *     (which averages over both); divide by the output count to compare. */
  SC_LOSS_SQUARED = 1,
  /* L = (1/B) sum_b sum_j |yhat_bj - t_bj|        target: B x outputs values;
   *     derivative of |0| taken as 0 */
  SC_LOSS_ABSOLUTE,
  /* L = (1/B) sum_b -log softmax(yhat_b)[t_b]     target: B int32_t class labels in
   *     [0, outputs) (else SC_ERR_ARG naming the sample). The chain needs at least 2
   *     outputs: fewer is SC_ERR_SHAPE in every call that takes a loss, sc_evaluate and
   *     sc_train included. The softmax is taken of the last layer's outputs after its
   *     activation: give it SC_IDENTITY for logits, as torch's CrossEntropyLoss expects;
   *     another activation is accepted everywhere alike (the loss is then that of the
   *     activated outputs), never warned about. */
  SC_LOSS_LOGIT_CROSSENTROPY
} sc_loss;

/* Loss value and gradients.
 *   target  see sc_loss: float (double for _f64) values, or int32_t labels.
 *   loss    (may be NULL) receives L.
 *   g       (may be NULL) receives dL/dp, length nparams. Overwritten, not accumulated.
 *   gx      (may be NULL) receives dL/dx, batch x inputs. Overwritten.
 * Inputs, targets and the parameters p are checked for NaN/Inf (SC_ERR_NONFINITE, naming
 * the sample or the parameter p[k]; nothing is written); so are those of sc_forward,
 * sc_loss_value, sc_evaluate and sc_pullback. (sc_valgrad without gx and sc_loss_value check x
 * as they load it, not in a pass of its own: when both x and p hold one, p's is the one named.)
 * A NaN or Inf that arises inside from finite values
 * (overflow of huge weights) is not an error: it propagates through every activation (relu
 * and tanh of NaN are NaN) into the outputs and the loss, alike on every kernel path. */
/* Small batches: sc_forward, sc_valgrad, sc_loss_value and sc_pullback with batch <= 4, on
 * a chain of dense, flatten and dropout layers only (and for sc_valgrad no dropout of rate
 * > 0; with a loss at most 64 outputs; float: fp32 precision), compute sample by sample as
 * sc_apply / sc_vjp do instead of on a tile of 32 samples: 6-10x faster at batch 1. The
 * choice depends on the chain and the batch size only; the results agree with the tile
 * path's to rounding (other last bits). */
sc_status sc_valgrad(const sc_chain *chain, sc_loss loss, const float *p, const float *x,
                     const void *target, size_t batch, float *lossv, float *g, float *gx,
                     sc_workspace *ws);
sc_status sc_valgrad_f64(const sc_chain *chain, sc_loss loss, const double *p, const double *x,
                         const void *target, size_t batch, double *lossv, double *g, double *gx,
                         sc_workspace *ws);

/* Loss value only (same definitions as sc_valgrad). */
sc_status sc_loss_value(const sc_chain *chain, sc_loss loss, const float *p, const float *x,
                        const void *target, size_t batch, float *lossv, sc_workspace *ws);
sc_status sc_loss_value_f64(const sc_chain *chain, sc_loss loss, const double *p, const double *x,
                            const void *target, size_t batch, double *lossv, sc_workspace *ws);

/* Classifier evaluation over a data set of any size n (processed in batches of the
 * workspace's max_batch): mean logit cross-entropy and the fraction of samples whose
 * largest logit is the label (ties: the first). labels: n int32_t in [0, outputs).
 * loss or accuracy may be NULL. */
sc_status sc_evaluate(const sc_chain *chain, const float *p, const float *x, const int32_t *labels,
                      size_t n, double *loss, double *accuracy, sc_workspace *ws);
sc_status sc_evaluate_f64(const sc_chain *chain, const double *p, const double *x,
                          const int32_t *labels, size_t n, double *loss, double *accuracy,
                          sc_workspace *ws);

/* Vector-Jacobian product with no loss: for y = chain(x; p) and a cotangent dy
 * (batch x outputs),
 *   g  += (dy/dp)^T dy   accumulated into g (length nparams; may be NULL),
 *   gx  = (dy/dx)^T dy   written (batch x inputs; may be NULL).
 * g accumulates so that an adjoint ODE solver can sum over time; zero it yourself. */
sc_status sc_pullback(const sc_chain *chain, const float *p, const float *x, const float *dy,
                      size_t batch, float *g, float *gx, sc_workspace *ws);
sc_status sc_pullback_f64(const sc_chain *chain, const double *p, const double *x, const double *dy,
                          size_t batch, double *g, double *gx, sc_workspace *ws);

/* ---------------------------------------------------------------- one state */
/* The single-state path, for ODE right-hand sides and adjoints: one input vector u
 * (inputs features), no batching, no tiles; a few matrix-vector products per call. It
 * allocates nothing and is thread-safe with one workspace per thread (any max_batch).
 * Every layer type is supported; dropout is the identity here.
 *   sc_apply: y = f(u; p)
 *   sc_vjp:   du += J_u(u)^T v  and  dp += J_p(u)^T v   (both accumulate; either may be
 *             NULL, e.g. du alone for the adjoint state, dp alone for the quadrature);
 *             y (may be NULL) receives f(u)
 *   sc_jvp:   jw = J_u(u) w  (overwritten); y (may be NULL) receives f(u)
 * u, v, w and p are checked for NaN/Inf (SC_ERR_NONFINITE). */
sc_status sc_apply(const sc_chain *chain, const float *p, const float *u, float *y,
                   sc_workspace *ws);
sc_status sc_apply_f64(const sc_chain *chain, const double *p, const double *u, double *y,
                       sc_workspace *ws);
sc_status sc_vjp(const sc_chain *chain, const float *p, const float *u, const float *v, float *y,
                 float *du, float *dp, sc_workspace *ws);
sc_status sc_vjp_f64(const sc_chain *chain, const double *p, const double *u, const double *v,
                     double *y, double *du, double *dp, sc_workspace *ws);
sc_status sc_jvp(const sc_chain *chain, const float *p, const float *u, const float *w, float *y,
                 float *jw, sc_workspace *ws);
sc_status sc_jvp_f64(const sc_chain *chain, const double *p, const double *u, const double *w,
                     double *y, double *jw, sc_workspace *ws);

/* ---------------------------------------------------------------- optimizers */
typedef enum sc_optim_kind { SC_ADAM = 1, SC_ADAMW, SC_SGD } sc_optim_kind;

/* Hyper-parameters. Update rules (t = step count starting at 1, all element-wise):
 *   ADAM : m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *          p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 *          (weight_decay > 0 adds weight_decay * p to g first, as torch.optim.Adam)
 *   ADAMW: p -= lr * weight_decay * p, then the ADAM step with the raw gradient
 *          (as torch.optim.AdamW); lr * weight_decay must be < 1 (SC_ERR_ARG), or the
 *          decay factor 1 - lr * weight_decay would flip or zero the parameters
 *   SGD  : g' = g + weight_decay * p;  buf = momentum * buf + g' (buf = g' at t = 1);
 *          p -= lr * buf   (momentum = 0: plain SGD; as torch.optim.SGD, no dampening)
 */
typedef struct sc_optim {
  sc_optim_kind kind;
  double lr;
  double beta1, beta2, eps; /* ADAM/AdamW */
  double momentum;          /* SGD */
  double weight_decay;
} sc_optim;

sc_optim sc_adam(double lr);                       /* betas 0.9, 0.999, eps 1e-8 */
sc_optim sc_adamw(double lr, double weight_decay); /* betas 0.9, 0.999, eps 1e-8 */
sc_optim sc_sgd(double lr, double momentum);

typedef struct sc_optimizer sc_optimizer;

sc_status sc_optimizer_bytes(const sc_optim *cfg, size_t n, size_t *bytes);
sc_status sc_optimizer_create(sc_optimizer **out, const sc_optim *cfg, size_t n);
sc_status sc_optimizer_init(sc_optimizer **out, const sc_optim *cfg, size_t n, void *mem,
                            size_t bytes);
void sc_optimizer_destroy(sc_optimizer *opt); /* NULL is fine (no-op for caller memory) */
/* Zero the moments and the step count (and forget the element type, below). */
sc_status sc_optimizer_reset(sc_optimizer *opt);
/* One update of p (length n, as at creation) from the gradient g. */
sc_status sc_optimizer_step(sc_optimizer *opt, float *p, const float *g, size_t n);
/* The same in double, with double moments (the rules above evaluated in double). An
 * optimizer's state has room for doubles (sc_optimizer_bytes counts 2 x n doubles); its
 * first step after creation or sc_optimizer_reset fixes its element type, and a step of the
 * other type is SC_ERR_ARG. */
sc_status sc_optimizer_step_f64(sc_optimizer *opt, double *p, const double *g, size_t n);

/* ---------------------------------------------------------------- training */
typedef struct sc_progress {
  size_t epoch;        /* 0-based epoch of the step just taken */
  size_t step;         /* steps taken so far (1-based) */
  size_t total_steps;  /* steps the run will take if not stopped */
  double loss;         /* loss of the minibatch of this step (before the update) */
  double epoch_loss;   /* mean minibatch loss of the epoch so far */
  double seconds;      /* wall time since sc_train started */
  const float *p;      /* current parameters (read only); NULL under sc_train_f64 */
  const double *p_f64; /* the same under sc_train_f64 (NULL under sc_train) */
} sc_progress;

/* Return non-zero to stop training (sc_train then returns SC_ERR_STOPPED). */
typedef int (*sc_progress_fn)(const sc_progress *progress, void *user);

/* Data-parallel training over several processes (sc_mpi.h binds it to MPI; anything that can
 * gather bytes from every process works). Every process runs sc_train with the same chain,
 * data (or at least the same sample count and the samples of its share), options and
 * initial p. A minibatch is cut into slices exactly as in one process (their number depends
 * on the batch size only); rank r computes the contiguous run of slices
 * [r * S / ranks, (r + 1) * S / ranks) and reads only the samples of those slices. The
 * slices' gradients and losses are then gathered on every rank and added in slice order, as
 * one process adds them, and every rank takes the same optimizer step: after every step p
 * is bitwise the same on every rank, and the same as sc_train in one process with the same
 * seed and batch size, for any number of ranks and threads per rank. A rank with no slice
 * (more ranks than slices) computes nothing and still takes part in the exchange.
 * Exchanged per step: S records of nparams floats plus the slice's loss (8-byte aligned). */
typedef struct sc_dist {
  int rank;  /* this process, in [0, ranks) */
  int ranks; /* processes taking part, >= 1 */
  /* Gathers counts[r] bytes from every rank r into recv + displs[r] (rank order, contiguous);
   * this rank's bytes are send. Called collectively, the same number of times with the same
   * counts on every rank (MPI_Allgatherv on bytes). Return 0, or non-zero for an error
   * (sc_train then returns SC_ERR_CALLBACK naming the step). */
  int (*allgather)(void *ctx, const void *send, void *recv, const size_t *counts,
                   const size_t *displs);
  void *ctx;
} sc_dist;

typedef enum sc_lr_schedule { SC_LR_CONSTANT = 0, SC_LR_COSINE = 1 } sc_lr_schedule;

typedef struct sc_train_opts {
  sc_optim optim;        /* default: sc_adam(1e-3) */
  size_t epochs;         /* default 1 */
  size_t batch_size;     /* 0 (default) = full batch */
  int shuffle;           /* 1 (default): reshuffle the sample order every epoch */
  uint64_t seed;         /* shuffling seed, default 0 */
  int threads;           /* default 1; at most this many are used (see sc_train_threads) */
  size_t progress_every; /* call progress every this many steps (0: never) */
  sc_progress_fn progress;
  void *user;
  const sc_dist *dist; /* NULL (default): this process alone; see sc_dist */
  /* Gradient clipping, as torch.nn.utils.clip_grad_norm_: when the L2 norm of the step's
   * gradient exceeds clip_norm it is scaled by clip_norm / (norm + 1e-6). 0 (default): off. */
  double clip_norm;
  /* Learning-rate schedule: SC_LR_CONSTANT (default) keeps optim.lr; SC_LR_COSINE anneals it
   * over the run's steps, lr_t = lr_min + (lr - lr_min) (1 + cos(pi t / T)) / 2 for step
   * t = 0 .. T-1 of T = epochs x steps per epoch (as torch's CosineAnnealingLR stepped per
   * batch). lr_min in [0, optim.lr]. */
  sc_lr_schedule lr_schedule;
  double lr_min;
  /* Checkpoints (see "Checkpoints" below). checkpoint: a file path, or NULL (default: none).
   * checkpoint_every: write it after every this many steps (0: only when the run ends or
   * is stopped by the progress callback). resume: 1 = if the checkpoint file exists,
   * continue the run it holds (a missing file starts from the beginning). */
  const char *checkpoint;
  size_t checkpoint_every;
  int resume;
  /* Per-layer profile (NULL: none): sc_train profiles its workspace and writes
   * profile_rows >= nlayers + 2 rows, as sc_workspace_profile_read, plus row nlayers + 1:
   * the optimizer step with the NaN guard (and checkpoints, when asked for). */
  sc_layer_profile *profile;
  size_t profile_rows;
  /* The precision of the training workspace (see sc_workspace_set_precision; default
   * SC_PRECISION_FP32). sc_train_f64 takes only SC_PRECISION_FP32 (it computes in double). */
  sc_precision precision;
} sc_train_opts;

sc_train_opts sc_train_defaults(void);

typedef struct sc_data {
  const float *x;     /* n x inputs */
  const void *target; /* see sc_loss: n x outputs floats, or n int32_t labels */
  size_t n;           /* number of samples */
} sc_data;

/* The data of sc_train_f64: x and float targets in double (labels stay int32_t). */
typedef struct sc_data_f64 {
  const double *x;    /* n x inputs */
  const void *target; /* n x outputs doubles, or n int32_t labels */
  size_t n;
} sc_data_f64;

typedef struct sc_train_report {
  size_t steps;
  size_t epochs;
  double final_loss; /* mean minibatch loss of the last epoch */
  double seconds;
  size_t resumed_step; /* the step a resumed run continued from (0: it started afresh) */
} sc_train_report;

/* Trains p in place. All memory (workspace, optimizer state, the shuffled index) is
 * allocated once before the first step; the steps allocate nothing. Minibatches are
 * gathered by index, the data set is not copied, but for one case: when every step reads
 * the same samples in the same order (full batch, or opts.shuffle = 0 with a batch size that
 * is a multiple of 32) the inputs and float targets are copied once, before the first step,
 * into the transposed tiles the steps read (up to 64 MiB; not for a chain whose first layer is
 * a flatten), which the steps then read in place instead of gathering them again: the same
 * results, bit for bit; environment variable SC_TRAIN_TILES=0 turns that off, =1 (or unset)
 * is the default, any other value is SC_ERR_ARG. So the data must not change during the
 * call. The last minibatch of an epoch may be smaller. Results are a function of (p, data,
 * opts.seed, batch size) only, not of opts.threads. report may be NULL. */
sc_status sc_train(const sc_chain *chain, sc_loss loss, float *p, const sc_data *data,
                   const sc_train_opts *opts, sc_train_report *report);
/* The number of threads sc_train and sc_train_f64 run on with opts on n samples: opts->threads,
 * but no more than can have work in a step, so that asking for more threads never slows
 * training down: the slices of one minibatch (up to 128 samples each for small dense chains,
 * 32 for convnets; this rank's share of them with opts->dist), or one thread per 65,536
 * parameters where that is more (the gradient's sum and the optimizer step are split over the
 * threads). LeNet5 at batch 64: 2, whatever opts->threads above 2. Results never depend on
 * the thread count. Errors: SC_ERR_NULL, SC_ERR_BATCH (n = 0), SC_ERR_ARG (opts->threads
 * outside [1, 1024], an invalid dist rank); *threads is 0 on error. */
sc_status sc_train_threads(const sc_chain *chain, const sc_train_opts *opts, size_t n,
                           int *threads);
/* sc_train in double: p, the data, the gradients (sc_valgrad_f64's), the optimizer step
 * (sc_optimizer_step_f64) and the checkpoint's arrays are double; everything said here of
 * sc_train holds (the NaN guard, checkpoints, threads, dist: each slice's gradient is
 * exchanged as doubles). The progress callback gets the parameters in p_f64. Each step
 * equals sc_valgrad_f64 followed by sc_optimizer_step_f64, bit for bit. A checkpoint
 * resumes only in the precision it was written in (SC_ERR_ARG otherwise). */
sc_status sc_train_f64(const sc_chain *chain, sc_loss loss, double *p, const sc_data_f64 *data,
                       const sc_train_opts *opts, sc_train_report *report);
/* NaN guard: a step whose loss or gradient is NaN or Inf, or whose update would make a
 * parameter NaN or Inf, stops training with SC_ERR_NONFINITE and a message naming the
 * step, the epoch and the minibatch; p then holds the parameters after the last good step
 * (a poisoned step never writes p; the optimizer state is not used again).
 *
 * Checkpoints: with opts.checkpoint set, sc_train writes a checkpoint file every
 * opts.checkpoint_every steps, when the progress callback stops it, and when it ends. It
 * holds p, the optimizer's moments and step count, the step, the epoch and the position in
 * it, the sample order and the shuffling generator (the dropout masks follow from the seed
 * and the step), with the settings it was written under and a checksum. It is written as
 * sc_params_save writes (a unique temporary file, fsync, rename, directory fsync: a crash
 * or kill -9 at any moment leaves the previous or the new checkpoint, whole) and with no
 * heap allocation where the system has POSIX I/O. With opts.resume, a run given the same
 * chain, data, batch size, seed, shuffle, optimizer and clip_norm (SC_ERR_ARG naming the
 * first difference otherwise) continues from the checkpoint, and ends with p bitwise
 * identical to the uninterrupted run's, for any thread count; opts.epochs may be raised to
 * train on (not with SC_LR_COSINE, whose rates depend on the run's length). The caller's initial p
 * is then replaced by the checkpoint's. A damaged file is SC_ERR_FORMAT naming the problem and its
 * offset; p is written only when the whole file checks out. With opts.dist, rank 0 writes and every
 * rank reads the file when resuming (a file system they share). A failed write stops training with
 * its error (p is valid). */

/* What a checkpoint file holds, for tools (sc_checkpoint_info). */
typedef struct sc_checkpoint_state {
  size_t step;       /* optimizer steps taken */
  size_t epoch;      /* the epoch of the next step */
  size_t epoch_step; /* steps already taken in that epoch */
  size_t samples, batch_size;
  uint64_t seed;
  int shuffle;
  sc_optim optim;
  double clip_norm;
  sc_lr_schedule lr_schedule;
  double lr_min;
  int f64; /* 1: written by sc_train_f64 (double arrays), 0: by sc_train */
} sc_checkpoint_state;
/* Reads and checks a whole checkpoint written for this chain (errors as for resuming). */
sc_status sc_checkpoint_info(const sc_chain *chain, const char *path, sc_checkpoint_state *info);

/* ---------------------------------------------------------------- data files (IDX) */
/* IDX files (the MNIST format), gzipped or raw.
 *
 * An IDX file is a big-endian header followed by the values, row-major:
 *   bytes 0..1   zero                          byte 2   data type (0x08 = uint8)
 *   byte  3      number of dimensions d        bytes 4..4+4d   d sizes, uint32 big-endian
 *   then the product of the sizes of uint8 values, and nothing after them.
 * Images are magic 0x00000803 (n x rows x cols), labels 0x00000801 (n).
 *
 * Every field is checked; a failure names the file and the byte offset:
 *   - bytes 0..1 must be zero                                       SC_ERR_FORMAT
 *   - byte 2: 0x08 (uint8) is read; the other IDX types 0x09 (int8), 0x0B (int16),
 *     0x0C (int32), 0x0D (float32), 0x0E (float64) give SC_ERR_UNSUPPORTED naming the
 *     type; any other value                                          SC_ERR_FORMAT
 *   - byte 3 must be 3 for images and 1 for labels                  SC_ERR_FORMAT
 *   - every size must be > 0, and the value count (their product) at most 2^31; the
 *     check is done on the header alone, before anything is allocated  SC_ERR_FORMAT
 *   - the header and the values must be all there: a truncated file fails with the
 *     offset where the data ended and the size expected              SC_ERR_FORMAT
 *   - nothing may follow the values                                 SC_ERR_FORMAT
 * Offsets count bytes of the decompressed stream (for a raw file, of the file). Memory
 * for the values grows as they are actually read, so a short file with a header that
 * claims a large size never triggers a large allocation.
 *
 * Compression: a library built with -DSC_HAVE_ZLIB (and linked with -lz; `make` does
 * both when zlib is installed) reads gzipped files (as distributed, "*.gz") and raw ones
 * alike; a corrupt or truncated gzip stream (bad data, bad CRC, missing end) is
 * SC_ERR_FORMAT quoting zlib's message. Concatenated gzip members read as one stream;
 * non-gzip bytes after the last member are ignored (as gzread and gunzip do; bytes after
 * the IDX data inside the stream are an error). Without zlib, a file starting with the
 * gzip magic 0x1f 0x8b gives SC_ERR_UNSUPPORTED: rebuild with zlib, or gunzip the file.
 *
 * Other errors: SC_ERR_NULL for a NULL pointer argument, SC_ERR_IO when the file cannot
 * be opened or read (the message names the path and the system's reason), SC_ERR_NOMEM.
 * On failure every output is set to NULL / 0 and nothing is left allocated. */

/* Images: magic 0x00000803, uint8, 3 dimensions. On success *images holds
 * (*n) x (*rows) x (*cols) floats, image i's pixel (r, c) at images[(i*rows + r)*cols + c]
 * (the NCHW layout of a 1 x rows x cols input; use sc_chain_create_image(.., 1, rows,
 * cols, ..) or sc_flatten), each value the byte times scale (1/255.f maps to [0, 1]).
 * scale must be finite (SC_ERR_ARG). Free *images with sc_free. */
sc_status sc_idx_load_images(const char *path, float **images, size_t *n, size_t *rows,
                             size_t *cols, float scale);

/* Labels: magic 0x00000801, uint8, 1 dimension. On success *labels holds *n int32_t
 * values, ready as targets for SC_LOSS_LOGIT_CROSSENTROPY and sc_evaluate. When
 * classes > 0 every label must be < classes (else SC_ERR_FORMAT naming the sample, its
 * label and its offset); classes == 0 accepts any byte. Free *labels with sc_free. */
sc_status sc_idx_load_labels(const char *path, int32_t **labels, size_t *n, size_t classes);

/* Frees memory the library returned (sc_idx_load_images, sc_idx_load_labels). NULL is
 * fine. */
void sc_free(void *p);

#ifdef __cplusplus
}
#endif
#endif /* SIMPLECHAIN_H */
