//! A second KV dtype, defined here and nowhere in the crate: f32 pools (four bytes a value, no scales).
//! It is one `KvFormat` (its row write and read), and it runs through the paged append and the paged
//! decode on the CPU backend, checked against the f64 reference, with no code outside this file knowing
//! it. The backends without a read path for it (the CUDA shim, wgpu) refuse it with a typed error.

use kvscope::cache::{KvDtype, KvFormat, PagedKvCache, PagedShape, ScaleLayout};
use kvscope::compute::cuda::SimBackend;
use kvscope::compute::{Backend, BackendError, CpuBackend, DecodeTables, PagedAppendInput, Tolerance, suite};
use kvscope::math::Rng;

fn write(src: &[f32], dst: &mut [u8], _scales: &mut [f32]) {
    for (d, s) in dst.chunks_exact_mut(4).zip(src) {
        d.copy_from_slice(&s.to_le_bytes());
    }
}

fn read(src: &[u8], _scales: &[f32], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(4)) {
        *d = f32::from_le_bytes(s.try_into().expect("four bytes"));
    }
}

static F32: KvFormat = KvFormat {
    name: "f32-test",
    bits: 32,
    scales: ScaleLayout::None,
    scale_init: 0.0,
    quant: None,
    write,
    read,
};

fn shape() -> PagedShape {
    PagedShape {
        num_blocks: 12,
        block_size: 4,
        kv_heads: 2,
        head_dim: 24,
        dtype: KvDtype::new(&F32),
    }
}

/// Requests of 9, 1 and 14 tokens, appended round robin through the backend's paged append.
fn filled(b: &dyn Backend, rng: &mut Rng) -> (PagedKvCache, Vec<Vec<f32>>) {
    let s = shape();
    let mut c = PagedKvCache::new(s);
    let lens = [9usize, 1, 14];
    let row = s.kv_heads * s.head_dim;
    let mut written = vec![Vec::new(); lens.len()];
    for pos in 0..14 {
        for (r, &len) in lens.iter().enumerate() {
            if pos >= len {
                continue;
            }
            let slots = c.append_slots(r as u32, 1).unwrap();
            let (k, v) = (rng.normal_vec(row, 1.0), rng.normal_vec(row, 1.0));
            let PagedKvCache { k_pool, v_pool, .. } = &mut c;
            b.paged_append(PagedAppendInput {
                shape: s,
                k_pool: k_pool.view_mut(),
                v_pool: v_pool.view_mut(),
                slot_mapping: &slots,
                k: &k,
                v: &v,
            })
            .unwrap();
            written[r].extend(k);
        }
    }
    (c, written)
}

#[test]
fn an_f32_dtype_defined_in_a_test_runs_paged_append_and_decode_on_the_cpu() {
    let s = shape();
    assert_eq!(
        kvscope::cache::kv_bytes_per_token(1, 2, 24, s.dtype),
        2 * 2 * 24 * 4,
        "f32 rows take four bytes a value"
    );
    let mut rng = Rng::new(11);
    let (c, written) = filled(&CpuBackend::new(), &mut rng);
    c.check_invariants().unwrap();
    assert_eq!(c.k_pool.dtype(), s.dtype);
    assert_eq!(c.k_pool.bytes().len(), s.numel() * 4);
    // f32 keeps every value exactly: the cache's gather reads back what was written.
    for (r, w) in written.iter().enumerate() {
        let (k, _) = c.gather(r as u32).unwrap();
        let len = c.len(r as u32);
        for pos in 0..len {
            for h in 0..s.kv_heads {
                let got = &k[(h * len + pos) * s.head_dim..][..s.head_dim];
                let want = &w[(pos * s.kv_heads + h) * s.head_dim..][..s.head_dim];
                assert_eq!(got, want, "request {r}, token {pos}, head {h}");
            }
        }
    }
    let reqs = [0u32, 1, 2];
    let tables = DecodeTables::new(&c, &reqs);
    let q = rng.normal_vec(reqs.len() * 6 * s.head_dim, 1.0);
    let report = suite::paged_equals_contiguous(&CpuBackend::new(), &tables.input(&c, &q, 6)).unwrap();
    assert!(report.passed(), "{report}");
    assert!(report.tolerance == Tolerance::F32, "{report}");
}

#[test]
fn backends_without_a_read_path_for_the_dtype_refuse_it() {
    let mut rng = Rng::new(12);
    let (c, _) = filled(&CpuBackend::new(), &mut rng);
    let tables = DecodeTables::new(&c, &[0, 2]);
    let q = rng.normal_vec(2 * 2 * shape().head_dim, 1.0);
    let err = SimBackend.paged_decode(&tables.input(&c, &q, 2)).unwrap_err();
    assert!(
        matches!(err, BackendError::UnsupportedDtype { dtype: "f32-test", .. }),
        "{err}"
    );
    assert!(err.to_string().contains("f32-test"), "{err}");
}

#[test]
fn a_pool_of_another_dtype_than_the_shape_is_invalid() {
    let s = shape();
    let mut c = PagedKvCache::new(PagedShape {
        dtype: KvDtype::F16,
        ..s
    });
    let PagedKvCache { k_pool, v_pool, .. } = &mut c;
    let err = CpuBackend::new()
        .paged_append(PagedAppendInput {
            shape: s,
            k_pool: k_pool.view_mut(),
            v_pool: v_pool.view_mut(),
            slot_mapping: &[0],
            k: &[0.0; 48],
            v: &[0.0; 48],
        })
        .unwrap_err();
    assert!(err.to_string().contains("f32-test pools, a pool holds f16"), "{err}");
}

#[test]
fn the_f32_dtype_runs_through_the_kv_engine() {
    let b = CpuBackend::new();
    let mut e = kvscope::kv::KvEngine::new(shape(), 2);
    let mut rng = Rng::new(13);
    for l in 0..2 {
        assert_eq!(e.pools(l).unwrap().0.dtype, shape().dtype);
    }
    let slots = e.reserve(4, 10).unwrap();
    for l in 0..2 {
        let n = slots.len() * 2 * 24;
        e.write(&b, l, &slots, &rng.normal_vec(n, 1.0), &rng.normal_vec(n, 1.0))
            .unwrap();
    }
    let tables = e.tables(&[4]);
    let q = rng.normal_vec(4 * 24, 1.0);
    for l in 0..2 {
        let (_, report) = e.decode_checked(&b, l, &tables, &q, 4).unwrap();
        assert!(report.passed(), "layer {l}: {report}");
    }
    let err = e.decode(&SimBackend, 0, &tables, &q, 4).unwrap_err();
    assert!(err.to_string().contains("no kernels for f32-test KV pools"), "{err}");
}
