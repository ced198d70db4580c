/* src/compute.c — the portable kernel set ("scalar": the reference every vector kernel is tested
 * against) and the typed bodies of the compute entry points (src/api.c), for float and double:
 * the typed files of src/typed/ compiled once per element type, with the baseline flags. */
#include "internal.h"

#define SC__T float
#define SC__TN(name) name##_f32
#define SC__TT(name) name##_f32
#define SC__F32 1
#include "typed/begin.h"
#include "typed/math.h"
#include "typed/act.h"
#include "typed/dense.h"
#include "typed/conv.h"
#include "typed/lanes.h"
#include "typed/choice.h"
#include "typed/slice.h"
#include "typed/one.h"
#include "typed/table.h"
#include "typed/exec.h"
#include "typed/end.h"

#define SC__T double
#define SC__TN(name) name##_f64
#define SC__TT(name) name##_f64
#define SC__F32 0
#include "typed/begin.h"
#include "typed/math.h"
#include "typed/act.h"
#include "typed/dense.h"
#include "typed/conv.h"
#include "typed/lanes.h"
#include "typed/choice.h"
#include "typed/slice.h"
#include "typed/one.h"
#include "typed/table.h"
#include "typed/exec.h"
#include "typed/end.h"
