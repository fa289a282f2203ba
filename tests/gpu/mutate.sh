#!/usr/bin/env bash
# Mutation test of the CUDA emulation: plants one bug at a time in the CUDA
# backend (kernels/lstm_cuda*.cu, lstm_cuda.h) or train/comm.c, on a copy of
# the tree, rebuilds only the emulated programs, runs the emulated tests
# (ctest -L emu) and prints which caught it. A bug no test catches is a
# hole in the tests; the exit status is 1 if there is one. Slow (about 40 s
# per bug): not for CI.
#
# Usage: tests/gpu/mutate.sh [WORK_DIR [NAME...]]
#   WORK_DIR  where the copy and its build go (default: build-mutate, which
#             git ignores); reused, so a second run rebuilds little
#   NAME      only these bugs (default: all, listed below)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$root/build-mutate}
shift || true
mkdir -p "$work"
work=$(cd "$work" && pwd)
src=$work/src
build=$work/build

# The bugs: NAME ~~ FILE ~~ OCCURRENCE ~~ TEXT ~~ REPLACEMENT ~~ WHAT.
# TEXT is replaced by REPLACEMENT (\n: a line break) at its OCCURRENCE-th
# place in FILE (0: it must occur exactly once).
mutants() {
  cat <<'EOF'
barrier_block_sum ~~ kernels/lstm_cuda.h ~~ 0 ~~   sh[threadIdx.x] = v;\n  __syncthreads();\n ~~   sh[threadIdx.x] = v;\n ~~ block_sum's first barrier missing (a thread reads a slot before its writer ran)
barrier_colsum ~~ kernels/lstm_cuda.h ~~ 0 ~~   __syncthreads();\n  if (threadIdx.y == 0 && j < n) { ~~   if (threadIdx.y == 0 && j < n) { ~~ colsum_part's barrier missing (colsum_kernel's and loss_cols_kernel's first pass)
gemm_ld_swapped ~~ kernels/lstm_cuda_common.cu ~~ 0 ~~ B, ldb, A, lda, &beta ~~ B, lda, A, ldb, &beta ~~ sgemm passes lda and ldb swapped
gemm_dx_transpose ~~ kernels/lstm_cuda_layer.cu ~~ 2 ~~ sgemm(c, NoTrans, NoTrans, N, In, G, 1.0f, dgates, G, w_ih, In ~~ sgemm(c, NoTrans, Trans, N, In, G, 1.0f, dgates, G, w_ih, In ~~ the dx GEMM transposes w_ih
c_prev_off_by_one ~~ kernels/lstm_cuda_layer.cu ~~ 2 ~~ cs + t * BH, B, H)); ~~ cs + (t + 1) * BH, B, H)); ~~ backward's cell reads c_t for c_{t-1}
host_pointer_to_kernel ~~ kernels/lstm_cuda_state.cu ~~ 0 ~~ tab_c, c->slots, B, L, H); ~~ tab_c, slots, B, L, H); ~~ state_gather_kernel given the host's slots
host_reads_device ~~ kernels/lstm_cuda_memory.cu ~~ 0 ~~ CUDA_CHECK(cudaMemcpyAsync(c->stage[k], (const unsigned char *)src + off, len,\n                               cudaMemcpyDeviceToHost, c->stream)); ~~ memcpy(c->stage[k], (const unsigned char *)src + off, len); ~~ download reads device memory from host code
kernel_overrun ~~ kernels/lstm_cuda_layer.cu ~~ 1 ~~ GRID_STRIDE(idx, (size_t)B * H) { ~~ GRID_STRIDE(idx, (size_t)B * H + 1) { ~~ lstm_cell_forward_kernel writes one element past its buffers
upload_staging_race ~~ kernels/lstm_cuda_memory.cu ~~ 0 ~~     CUDA_CHECK(cudaEventSynchronize(c->stage_ev[k])); /* stage[k]'s last transfer is done */\n ~~  ~~ upload refills a staging buffer before its last copy ran
download_no_wait ~~ kernels/lstm_cuda_memory.cu ~~ 0 ~~   CUDA_CHECK(cudaStreamSynchronize(c->stream));\n  if (pk >= 0) ~~   if (pk >= 0) ~~ download copies out its last chunk without waiting for it
figures_no_wait ~~ kernels/lstm_cuda_memory.cu ~~ 0 ~~   CUDA_CHECK(cudaEventSynchronize(c->fetch_ev));\n ~~  ~~ fetch_wait reads the pinned figures without waiting for their copy
alloc_not_zeroed ~~ kernels/lstm_cuda_memory.cu ~~ 0 ~~ cudaError_t const z = cudaMemsetAsync(p, 0, bytes, c->stream); ~~ cudaError_t const z = cudaSuccess; ~~ alloc returns memory that is not zeroed
loss_padding_counted ~~ kernels/lstm_cuda_head.cu ~~ 0 ~~     if (m == 0.0f) { /* padding ~~     if (m < 0.0f) { /* padding ~~ mse_loss_kernel trains on padding
elem_unknown_counted ~~ kernels/lstm_cuda_head.cu ~~ 0 ~~       if (m == 0.0f) { /* not known ~~       if (m < 0.0f) { /* not known ~~ elem_loss_kernel trains on unknown targets
elem_row_mask_ignored ~~ kernels/lstm_cuda_head.cu ~~ 0 ~~     float const mr = mask != NULL && mask_cols == 1 ? mask[r] : 1.0f; ~~     float const mr = 1.0f; ~~ elem_loss_kernel ignores a mask per row (pinball columns with ls_engine_forward)
elem_level_of_column_0 ~~ kernels/lstm_cuda_head.cu ~~ 0 ~~ loss_elem(p[o] - y[o], tau[o], &g) ~~ loss_elem(p[o] - y[o], tau[0], &g) ~~ elem_loss_kernel takes column 0's loss for every column
reduce_short ~~ kernels/lstm_cuda.h ~~ 0 ~~ b < blocks; b += THREADS ~~ b < blocks - 1; b += THREADS ~~ reduce_partials (the last block's sum of the loss and the gradient norm) leaves out the last block's part
gemm_dx_transpose_persist ~~ kernels/lstm_cuda_layer.cu ~~ 1 ~~ sgemm(c, NoTrans, NoTrans, N, In, G, 1.0f, dgates, G, w_ih, In ~~ sgemm(c, NoTrans, Trans, N, In, G, 1.0f, dgates, G, w_ih, In ~~ the dx GEMM after a persistent backward (input not fused) transposes w_ih
persist_step_sync ~~ kernels/lstm_cuda_persist.cu ~~ 0 ~~       persist_sync(C); /* h_t is in every block's zn; zt may be written again */\n ~~  ~~ the persistent forward's barrier between time steps missing
persist_dsmem_own ~~ kernels/lstm_cuda_persist.cu ~~ 0 ~~ persist_put(o.zn + b * K + Kx + j, h, C, rank); ~~ persist_put(o.zn + b * K + Kx + j, h, 1, rank); ~~ the persistent forward writes h_t into its own block only, not the cluster's others
persist_group_stride ~~ kernels/lstm_cuda_persist.cu ~~ 0 ~~ grp += (int)gridDim.x / C) { ~~ grp += (int)gridDim.x) { ~~ the persistent forward's clusters step over groups by blocks, not clusters (groups skipped)
persist_bwd_first_block ~~ kernels/lstm_cuda_persist_bwd.cu ~~ 0 ~~ if (!last_block(io.ticket, m.flag)) return; ~~ if (blockIdx.x != 0) return; ~~ the persistent backward's groups summed by block 0, not by the last to finish
adam_grad_kept ~~ kernels/lstm_cuda_head.cu ~~ 0 ~~     g[i] = 0.0f;\n ~~  ~~ adam_update_kernel does not zero the gradient
adam_skip_counted ~~ kernels/lstm_cuda_head.cu ~~ 0 ~~  && !(args->opt.skip_nonfinite && !isfinite(*norm_sq))) ~~ ) ~~ grad_norm_sq_kernel counts a skipped update (the next one's bias correction is off)
adam_skip_ignored ~~ kernels/lstm_cuda_head.cu ~~ 0 ~~ int const skip = opt.skip_nonfinite && !isfinite(*norm_sq); ~~ int const skip = 0; ~~ a non-finite gradient reaches the parameters
seq_targets_row0 ~~ kernels/lstm_cuda_head.cu ~~ 0 ~~ *target = seq + (size_t)B * In; /* row 1 */ ~~ *target = seq; /* row 0 */ ~~ seq_targets gives a sequence's inputs as its targets
sync_ignored ~~ kernels/lstm_cuda.cu ~~ 0 ~~ launch_sync = sync != NULL && !strcmp(sync, "1"); ~~ launch_sync = sync != NULL && 0; ~~ LSTREAM_CUDA_SYNC=1 ignored
nccl_no_wait_before ~~ train/comm.c ~~ 0 ~~     CUDA_TRY(cudaStreamWaitEvent(c->stream, c->ready, 0), "ordering the all-reduce");\n ~~  ~~ a segment's sum does not wait for backward's event
nccl_no_wait_after ~~ train/comm.c ~~ 0 ~~     CUDA_TRY(cudaStreamWaitEvent(c->engine, c->done, 0), "ordering the optimizer step");\n ~~  ~~ the optimizer does not wait for the sums' event
nccl_event_wrong_stream ~~ train/comm.c ~~ 0 ~~ cudaEventRecord(c->ready, (cudaStream_t)stream) ~~ cudaEventRecord(c->ready, c->stream) ~~ the segment's event recorded on NCCL's stream, not the engine's
nccl_count_in_bytes ~~ train/comm.c ~~ 0 ~~ c->grad + offset, count, ncclFloat ~~ c->grad + offset, count * sizeof(float), ncclFloat ~~ ncclAllReduce given bytes for elements
nccl_wrong_range ~~ train/comm.c ~~ 0 ~~ nccl.all_reduce(c->grad + offset, c->grad + offset, ~~ nccl.all_reduce(c->grad, c->grad, ~~ every segment sums the start of the buffer
nccl_id_not_sent ~~ train/comm.c ~~ 0 ~~   if (c->world > 1) {\n    int const rc = MPI_Bcast(&id ~~   if (0) {\n    int const rc = MPI_Bcast(&id ~~ rank 0's NCCL id is not broadcast
nccl_always_ignored ~~ train/comm.c ~~ 0 ~~ if ((c->world == 1 && !c->always) || count == 0) ~~ if (c->world == 1 || count == 0) ~~ comm_always does not force the sums on one rank
nccl_wait_blocks ~~ train/comm.c ~~ 0 ~~ return nccl_wait(c, "the gradient sums"); ~~ return cudaStreamSynchronize(c->stream) == cudaSuccess ? LS_OK : LS_ERR_BACKEND; ~~ the wait for sums blocks on their stream instead of polling it with a time limit
nccl_no_wait_in_replay ~~ train/trainer.c ~~ 0 ~~     LS_FORWARD_IF_ERROR(comm_wait(tr->v.comm));\n ~~  ~~ a replay update's uploads may wait behind the last update's sums
EOF
}

# apply FILE OCCURRENCE TEXT REPLACEMENT: edits FILE in place.
apply() {
  perl -e '
    my ($file, $occ, $old, $new) = @ARGV;
    s/\\n/\n/g for ($old, $new);
    open(my $in, "<", $file) or die "$file: $!\n";
    my $s = do { local $/; <$in> };
    close($in);
    my @at;
    for (my $i = index($s, $old); $i >= 0; $i = index($s, $old, $i + length $old)) { push @at, $i }
    die "the text occurs " . scalar(@at) . " times in $file\n"
      if !@at || ($occ == 0 && @at != 1) || $occ > @at;
    substr($s, $at[$occ ? $occ - 1 : 0], length $old) = $new;
    open(my $out, ">", $file) or die "$file: $!\n";
    print $out $s;
    close($out);' "$@"
}

targets=(lstream lstream_on_emu test_cuda_engine_emu test_emu_engine emu_cublas emu_nccl)
rebuild() { cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >"$work/build.log" 2>&1; }
# run_tests: the emulated tests; prints the names of those that failed.
run_tests() {
  ctest --test-dir "$build" -L emu -j"$(nproc)" >"$work/ctest.log" 2>&1 || true
  sed -n 's/^[[:space:]]*[0-9]* - \([a-z0-9_]*\) (.*)$/\1/p' "$work/ctest.log" | sort | tr '\n' ' '
}

echo "== copying the tree to $src"
rm -rf "$src"
mkdir -p "$src"
git -C "$root" ls-files -co --exclude-standard -z | (cd "$root" && tar --null -T - -cf -) |
  tar -xf - -C "$src"
echo "== building the emulated programs in $build"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLSTREAM_CUDA=OFF >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; exit 1; }
rebuild || { tail -30 "$work/build.log"; exit 1; }
echo "== the unmutated tree"
failed=$(run_tests)
[ -z "$failed" ] || { cat "$work/ctest.log"; echo "tests fail without a mutation: $failed"; exit 1; }
grep -E '^[0-9]+% tests passed' "$work/ctest.log"

want=" $* "
rows=()
holes=0
while IFS= read -r line <&3; do
  IFS=$'\x1f' read -r name file occ old new what <<<"$(echo "$line" | sed 's/ ~~ /\x1f/g')"
  [ $# -eq 0 ] || [[ $want == *" $name "* ]] || continue
  cp "$src/$file" "$work/original"
  apply "$src/$file" "$occ" "$old" "$new" || { echo "$name: cannot apply"; exit 1; }
  t0=$SECONDS
  if rebuild; then
    caught=$(run_tests)
  else
    caught="(does not build)"
  fi
  cp "$work/original" "$src/$file" # and a newer mtime: the next build recompiles it
  touch "$src/$file"
  [ -n "$caught" ] || { caught="NOT CAUGHT"; holes=$((holes + 1)); }
  echo "$name ($((SECONDS - t0)) s): $caught"
  rows+=("| $name | $file: $what | $caught |")
done 3< <(mutants)
rebuild || true

echo
echo "| bug | what | caught by |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
[ "$holes" -eq 0 ] || { echo "$holes bug(s) not caught"; exit 1; }
