/* src/typed/end.h — closes an instantiation opened by src/typed/begin.h: its macros undefined, so
 * that the next one (the other element type, another kernel set) starts clean. */
#undef SC__K_FWD
#undef SC__BFP
#undef SC__K_DW
#undef SC__K_TRANSPOSE
#undef SC__K_DX
#undef SC__K_DWL
#undef SC__DWL_BL
#undef SC__K_FWD_H
#undef SC__K_DX_H
#undef SC__K_DX_ACT_H
#undef SC__K_DWL_FOLD
#undef SC__K_FOLD_TW
#undef SC__K_DWD
#undef SC__DWD_DENSE
#undef SC__K_DWL2
#undef SC__K_DX_ACT
#undef SC__DX_ACT_OK
#undef SC__DWL_LANES
#undef SC__K_ACTB
#undef SC__K_CONV_FWD
#undef SC__K_CONV_DWL
#undef SC__K_CONV_DX
#undef SC__K_POOL_FWD
#undef SC__K_POOL_BWD
#undef SC__K_POOL2_ACT_BWD
#undef SC__K_CONV_POOL_FWD
#undef SC__K_POOL2_HITS_BWD
#undef SC__F32_POOL_FOLD

#undef SC__TANH
#undef SC__EXP
#undef SC__EXPM1
#undef SC__LOG1P
#undef SC__LOG
#undef SC__FABS
#undef SC__GELU_K0
#undef SC__GELU_K1
#undef SC__EXPMAX
#ifdef SC__POP_OPTIONS
#pragma GCC pop_options
#undef SC__POP_OPTIONS
#endif
#undef SC__T
#undef SC__TN
#undef SC__TT
#undef SC__F32
#undef SC__KSTATIC
