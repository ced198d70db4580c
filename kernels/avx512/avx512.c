/* kernels/avx512/avx512.c — the kernel set for CPUs with AVX-512 (F, BW, VL, DQ): the whole
 * per-slice pipeline (input gather, fused layer kernels, loss, fused pullback) and the one-state
 * path, compiled for this instruction set, with the float kernels from the vector kernels of
 * kernels/x86/ (explicit vector code) and most double ones auto-vectorised from the portable
 * source. The tables it exports are what src/dispatch.c picks when the CPU supports AVX-512
 * (SC_ISA=avx512 forces them). */
#include "begin.h"

#include "../../src/internal.h"

#define SC__T float
#define SC__TN(name) name##_f32_avx512
#define SC__TT(name) name##_f32
#define SC__F32 1
#include "../../src/typed/begin.h"
#include "../../src/typed/math.h"
#include "../../src/typed/act.h"
#include "../../src/typed/dense.h"
#include "../../src/typed/conv.h"
#include "../../src/typed/lanes.h"
#include "../x86/f32.h"
#include "../../src/typed/choice.h"
#include "../../src/typed/slice.h"
#include "../x86/one_f32.h"
#include "../../src/typed/one.h"
#include "../../src/typed/table.h"
#include "../../src/typed/end.h"

#define SC__T double
#define SC__TN(name) name##_f64_avx512
#define SC__TT(name) name##_f64
#define SC__F32 0
#include "../../src/typed/begin.h"
#include "../../src/typed/math.h"
#include "../../src/typed/act.h"
#include "../../src/typed/dense.h"
#include "../../src/typed/conv.h"
#include "../../src/typed/lanes.h"
#include "../x86/f64.h"
#include "../../src/typed/choice.h"
#include "../../src/typed/slice.h"
#include "../../src/typed/one.h"
#include "../../src/typed/table.h"
#include "../../src/typed/end.h"

#include "end.h"
