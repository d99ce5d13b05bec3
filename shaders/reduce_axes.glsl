// reduce_axes.glsl - element offsets of reduce.comp and argreduce.comp:
// kept_offset(o) is where output o's reduction starts, red_offset(k) the
// offset of its k-th reduced element, from the arena copied to s_args
// (kept_shape, kept_strides, red_shape, red_strides, in_off) and the push
// constants rank_kept and rank_red.
shared uint s_args[4 * NXV_MAX_RANK + 1];

uint kept_offset(uint o) {
  uint rk = pc.rank_kept, off = s_args[2u * rk + 2u * pc.rank_red];
  for (int d = int(rk) - 1; d >= 0; --d) {
    uint dim = s_args[d];
    uint q = o / dim;
    off += (o - q * dim) * s_args[rk + uint(d)];
    o = q;
  }
  return off;
}

uint red_offset(uint k) {
  uint base = 2u * pc.rank_kept, rr = pc.rank_red, off = 0u;
  for (int d = int(rr) - 1; d >= 0; --d) {
    uint dim = s_args[base + uint(d)];
    uint q = k / dim;
    off += (k - q * dim) * s_args[base + rr + uint(d)];
    k = q;
  }
  return off;
}
