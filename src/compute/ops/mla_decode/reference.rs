//! The f64 oracle of `mla_decode`.

use super::*;

/// The f64 reference of the absorbed kernel: `[R, H, d_c]`.
pub fn reference(inp: &MlaDecodeInput) -> Vec<f64> {
    let lat = inp.latent.as_f16().unwrap_or(&[]);
    let (h, dc, dr) = (inp.n_heads, inp.d_c, inp.d_r);
    let dim = dc + dr;
    let mut out = Vec::with_capacity(inp.requests() * h * dc);
    for r in 0..inp.requests() {
        let len = inp.context_lens[r].max(0) as usize;
        let rows: Vec<&[half::f16]> = (0..len).map(|t| &lat[inp.row(r, t) * dim..][..dim]).collect();
        for hh in 0..h {
            let qa = &inp.q_abs[(r * h + hh) * dc..][..dc];
            let qr = &inp.q_rope[(r * h + hh) * dr..][..dr];
            let mut s: Vec<f64> = rows
                .iter()
                .map(|row| {
                    let a: f64 = qa.iter().zip(&row[..dc]).map(|(q, c)| f64::from(*q) * c.to_f64()).sum();
                    let b: f64 = qr.iter().zip(&row[dc..]).map(|(q, c)| f64::from(*q) * c.to_f64()).sum();
                    (a + b) * f64::from(inp.scale)
                })
                .collect();
            let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = s
                .iter_mut()
                .map(|x| {
                    *x = (*x - m).exp();
                    *x
                })
                .sum();
            let mut o = vec![0f64; dc];
            for (p, row) in s.iter().zip(&rows) {
                for (oo, c) in o.iter_mut().zip(&row[..dc]) {
                    *oo += p / z * c.to_f64();
                }
            }
            out.extend(o);
        }
    }
    out
}
