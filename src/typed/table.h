/* src/typed/table.h — a kernel set's table (src/internal.h's sc__kt_f32 / sc__kt_f64): exported
 * from its kernels/ file, static in a built-in set of the two drop-in files (SC__KT_LINKAGE), and
 * the portable set's ("scalar", src/compute.c). */
#ifdef SC__KERNELS_ONLY
#ifndef SC__KT_LINKAGE
#define SC__KT_LINKAGE /* exported from a kernels/ file; static for the built-in set */
#endif
#if SC__F32
SC__KT_LINKAGE const sc__kt_f32 SC__KT_EXPORT_F32 = {SC__ISA_NAME,
                                                     SC__TN(sc__run_slice),
                                                     SC__TN(sc__find_nonfinite),
                                                     SC__TN(sc__adam),
                                                     SC__TN(sc__one),
#ifdef SC__VEC_CONV
                                                     vec_conv_fwd_names,
                                                     vec_conv_dw_names,
                                                     V_CONV_DW_K6
#else
                                                     NULL,
                                                     NULL,
                                                     0
#endif
};
#else
SC__KT_LINKAGE const sc__kt_f64 SC__KT_EXPORT_F64 = {SC__ISA_NAME, SC__TN(sc__run_slice),
                                                     SC__TN(sc__find_nonfinite), SC__TN(sc__one)};
#endif
#else /* the portable set */
#if SC__F32
SC__INT const sc__kt_f32 sc__kt_ref_f32 = {
    "scalar", sc__run_slice_f32, sc__find_nonfinite_f32, sc__adam_f32, sc__one_f32, NULL, NULL, 0};
#else
SC__INT const sc__kt_f64 sc__kt_ref_f64 = {"scalar", sc__run_slice_f64, sc__find_nonfinite_f64,
                                           sc__one_f64};
#endif
#endif
