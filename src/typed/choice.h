/* src/typed/choice.h — which kernel each step of the slice pipeline (src/typed/slice.h) calls: a
 * kernel set's vector kernels define the SC__K_* they take over (kernels/x86/f32.h, f64.h, included
 * before this file); the portable kernels of this element type take the rest. */
#ifndef SC__K_FWD
#define SC__K_FWD SC__TN(sc__dense_fwd)
#endif
#ifndef SC__BFP
#define SC__BFP(name) sc__bf16_##name
#endif
#ifndef SC__K_DW
#define SC__K_DW SC__TN(sc__dense_dw)
#endif
#ifndef SC__K_DX
#define SC__K_DX SC__TN(sc__dense_dx)
#endif
#ifndef SC__K_DWL
#define SC__K_DWL SC__TN(sc__dense_dwl)
#endif
/* folds SC__TW-lane accumulators (the bias lanes everywhere, dW lanes off the float vector
 * paths) */
#ifndef SC__K_FOLD_TW
#define SC__K_FOLD_TW SC__TN(sc__dwl_fold)
#endif
#ifndef SC__K_DWL_FOLD
#define SC__K_DWL_FOLD SC__K_FOLD_TW
#endif
#ifndef SC__DWL_LANES
#define SC__DWL_LANES SC__TW
#endif
#ifndef SC__DWD_DENSE
#define SC__DWD_DENSE 0
#endif
#define SC__K_ACTB SC__TN(sc__act_bwd)
#ifndef SC__K_CONV_FWD
#define SC__K_CONV_FWD SC__TN(sc__conv_fwd)
#define SC__K_CONV_DWL SC__TN(sc__conv_dwl)
#define SC__K_CONV_DX SC__TN(sc__conv_dx)
#define SC__K_POOL_FWD SC__TN(sc__pool_fwd)
#define SC__K_POOL_BWD SC__TN(sc__pool_bwd)
#endif
