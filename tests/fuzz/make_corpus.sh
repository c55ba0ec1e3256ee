#!/bin/sh
# Builds the fuzz seed corpus: a few ONNX node conformance models (if present), the e2e bad models
# (if generated), the committed regression inputs and, given GENERATOR (tests/hostile/make_hostile.py)
# and a python3, generated seeds that reach every nesting limit (subgraphs, Loop bodies, sequence
# types), external data references and many op types.
# Usage: make_corpus.sh OUT ONNX_NODE_DIR E2E_DIR REGRESSIONS [GENERATOR]
out=$1 node=$2 e2e=$3 reg=$4 gen=$5
rm -rf "$out" && mkdir -p "$out"
for t in test_conv_with_strides_padding test_gather_0 test_gather_elements_0 test_slice test_if test_loop11 \
         test_lstm_defaults test_gru_defaults test_resize_upsample_scales_linear test_reshape_extended_dims \
         test_maxpool_2d_pads test_batchnorm_epsilon test_matmul_2d test_softmax_axis_0 test_split_equal_parts_1d \
         test_cast_FLOAT_to_FLOAT16 test_range_float_type_positive_delta_expanded test_constantofshape_int_zeros \
         test_einsum_batch_matmul test_qlinearconv test_dequantizelinear test_topk test_nonzero_example; do
  [ -f "$node/$t/model.onnx" ] && cp "$node/$t/model.onnx" "$out/$t.onnx"
done
[ -d "$e2e" ] && for f in "$e2e"/*.onnx; do [ -f "$f" ] && cp "$f" "$out/e2e_$(basename "$f")"; done
[ -d "$reg" ] && for f in "$reg"/*.onnx; do [ -f "$f" ] && cp "$f" "$out/"; done
if [ -n "$gen" ] && command -v python3 >/dev/null; then python3 "$gen" --corpus "$out" || exit 1; fi
echo "fuzz corpus: $(ls "$out" | wc -l) seeds in $out"
