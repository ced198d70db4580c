/* kernels/x86/f32.h — the float vector kernels of an x86 kernel set, by layer family, and which
 * step of the slice pipeline (src/typed/slice.h) each one takes over (SC__K_*; src/typed/choice.h
 * gives the portable kernels the steps left). Included in a set's float instantiation, after the
 * portable kernels. */
#include "vec.h"
#include "act.h"
#include "dense.h"
#include "conv.h"
#include "pool.h"
#include "gather.h"
#include "bf16_pack.h"
#define SC__K_FWD vec_dense_fwd_f32
#define SC__BFP(name) v_bf16_##name /* the bf16 packers */
#define SC__K_DW vec_dense_dw_f32
#if VW == 16
#define SC__K_TRANSPOSE vec_transpose_f32
#endif
#define SC__K_DX vec_dense_dx_f32
#define SC__K_DWL vec_dense_dwl_f32
#define SC__DWL_BL 1 /* its dW kernels take the bias lanes (vec_dense_dwl_n) and a half flag */
/* the dense kernels of a half tile (SC__KH in the slice's tile loop) */
#define SC__K_FWD_H vec_dense_fwd_h_f32
#define SC__K_DX_H vec_dense_dx_h_f32
#define SC__K_DX_ACT_H vec_dense_dx_act_h_f32
#define SC__K_DWL_FOLD vec_dwl_fold_f32
#define SC__DWL_LANES VW /* lane-form accumulators hold one native vector */
#if defined(SC__VEC_DWL2)
#define SC__K_DWL2 vec_dense_dwl2_f32
#endif
#define SC__K_DX_ACT vec_dense_dx_act_f32
#define SC__DX_ACT_OK(act)                                                                         \
  ((act) == SC_IDENTITY || (act) == SC_RELU || (act) == SC_TANH || (act) == SC_SIGMOID)
#define SC__K_CONV_FWD vec_conv_fwd_f32
#define SC__K_CONV_DWL vec_conv_dwl_f32
#define SC__K_CONV_DX vec_conv_dx_f32
#define SC__K_POOL_FWD vec_pool_fwd_f32
#define SC__K_POOL_BWD vec_pool_bwd_f32
#define SC__K_POOL2_ACT_BWD vec_pool2_act_bwd_f32
#define SC__K_CONV_POOL_FWD vec_conv_pool_fwd_f32
#define SC__K_POOL2_HITS_BWD vec_pool2_hits_bwd_f32
