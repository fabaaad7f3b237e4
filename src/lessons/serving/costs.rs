//! Swap against recompute from device facts (lesson 12's offload step): the two models compared, each
//! side's seconds for a request, the context where they cross, and the device rates quoted.

use crate::calc::{self, Format, ModelSpec};

/// The two models of the device-fact comparison: MHA (no KV sharing) and GQA.
pub const FACT_MODELS: [&str; 2] = ["Llama-2-7B", "Llama-3-8B"];

/// Swap (out and back in over PCIe) and recompute (a prefill at peak FLOP/s) seconds for a request of
/// `n` tokens of `m`, from device facts: `pcie` bytes/s one way, `flops` FLOP/s. Recompute counts
/// 2 FLOPs per parameter per token plus causal attention (QKᵀ and PV: 2 · layers · heads · head_dim ·
/// n² FLOPs); both are the best case (peak rates, no overlap).
pub fn fact_costs(m: &ModelSpec, n: usize, pcie: f64, flops: f64) -> (f64, f64) {
    let bf16 = Format::parse("bf16").expect("bf16 is a format");
    let kv = calc::request_bytes(m, &bf16, n);
    let swap = 2.0 * kv / pcie;
    let (params, _) = m.parameters();
    let nf = n as f64;
    let attn = 2.0 * m.layers as f64 * (m.heads * m.head_dim) as f64 * nf * nf;
    let recompute = (2.0 * params as f64 * nf + attn) / flops;
    (swap, recompute)
}

/// The smallest context (searched by doubling, then bisection, up to 1M tokens) at which recomputing
/// costs more than swapping, or `None` when recompute is cheaper throughout, or more costly from the
/// first token.
pub fn crossover(m: &ModelSpec, pcie: f64, flops: f64) -> Option<usize> {
    let worse = |n: usize| {
        let (s, r) = fact_costs(m, n, pcie, flops);
        r > s
    };
    if worse(1) {
        return None;
    }
    let mut hi = 2;
    while !worse(hi) {
        hi *= 2;
        if hi > 1 << 20 {
            return None;
        }
    }
    let mut lo = hi / 2;
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if worse(mid) { hi = mid } else { lo = mid }
    }
    Some(hi)
}

/// The device facts the comparison uses: PCIe Gen5 x16 one way, H100 SXM dense BF16, in bytes/s and
/// FLOP/s.
pub fn device_rates() -> (f64, f64) {
    let pcie = crate::facts::fact("pcie5_x16_one_way").number() * 1e9;
    let flops = crate::facts::fact("h100_sxm_bf16_dense").number() * 1e12;
    (pcie, flops)
}
