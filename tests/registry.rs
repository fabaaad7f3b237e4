//! The two tables kvscope grows by: the lesson registry and the backend table. Every shipped lesson has
//! a registered kind, every kind draws a kernel panel, every backend row is consistent, and an op a
//! backend has not implemented is a clear error that lessons pass on instead of panicking.

use kvscope::compute::{
    AttnInput, BACKENDS, Backend, BackendError, BackendKind, DecodeTables, Op, PagedAppendInput, StaticAppendInput,
    kernel_source, suite,
};
use kvscope::lessons::{self, REGISTRY};
use kvscope::math::{AttnShape, AttnWeights, Mask, Rng, project};

#[test]
fn every_lesson_file_has_a_registered_kind_and_every_kind_a_kernel_view() {
    let mut names: Vec<&str> = REGISTRY.iter().map(|k| k.name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), REGISTRY.len(), "kind names are unique");
    for k in REGISTRY {
        assert!(k.view_names().contains(&"kernel"), "{} has a kernel view", k.name());
        assert!(!k.ops().is_empty(), "{} runs ops", k.name());
    }
    for l in kvscope::lesson::load_embedded().unwrap() {
        assert!(REGISTRY.iter().any(|k| std::ptr::addr_eq(*k, l.kind)), "{}", l.id());
    }
}

#[test]
fn the_backend_table_is_consistent() {
    assert_eq!(BACKENDS.len(), BackendKind::ALL.len());
    for (row, kind) in BACKENDS.iter().zip(BackendKind::ALL) {
        assert_eq!(row.kind, kind);
        assert_eq!(kind.info().kind, kind);
    }
    // Every op has a source a student can read, whatever backend is active; the paths exist.
    for kind in BackendKind::ALL {
        for op in Op::ALL {
            let src = kernel_source(kind, op).unwrap_or_else(|| panic!("{op:?} on {}", kind.name()));
            let on_disk =
                std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(src.path)).unwrap();
            assert_eq!(on_disk, src.source);
            assert!(src.source.lines().nth(src.line - 1).unwrap().contains(src.entry));
        }
    }
}

/// A backend that implements no op yet.
struct Bare;

impl Backend for Bare {
    fn kind(&self) -> BackendKind {
        BackendKind::CudaSim
    }
    fn device(&self) -> String {
        "nothing yet".into()
    }
}

fn is_not_implemented(r: Result<impl Sized, BackendError>, op: &str) {
    match r {
        Err(e @ BackendError::NotImplemented { .. }) => {
            assert_eq!(
                e.to_string(),
                format!("`{op}` is not implemented on the cuda-sim backend yet")
            )
        }
        Err(e) => panic!("{op}: {e}"),
        Ok(_) => panic!("{op}: ran"),
    }
}

#[test]
fn an_unimplemented_op_is_a_clear_error_and_lessons_pass_it_on() {
    let b = Bare;
    let shape = AttnShape {
        seq: 4,
        d_model: 8,
        n_heads: 2,
        n_kv_heads: 1,
    };
    let qkv = project(&AttnWeights::random(shape, 0));
    let inp = AttnInput {
        q: &qkv.q,
        k: &qkv.k,
        v: &qkv.v,
        mask: Mask::Causal,
    };
    is_not_implemented(b.attention(&inp), "attention");
    is_not_implemented(b.attention_fused(&inp), "attention_fused");
    is_not_implemented(
        b.flash_attention(&kvscope::compute::FlashInput {
            attn: inp,
            block_q: 2,
            block_k: 2,
        }),
        "flash_attention",
    );
    let s = kvscope::cache::StaticShape {
        layers: 1,
        batch: 1,
        kv_heads: 1,
        max_seq_len: 2,
        head_dim: 2,
    };
    let (mut k, mut v) = (vec![half::f16::ZERO; s.numel()], vec![half::f16::ZERO; s.numel()]);
    is_not_implemented(
        b.static_cache_append(StaticAppendInput {
            shape: s,
            k_cache: &mut k,
            v_cache: &mut v,
            layer: 0,
            pos: 1,
            k_new: &[1.0, 2.0],
            v_new: &[3.0, 4.0],
        }),
        "static_cache_append",
    );
    let p = kvscope::cache::PagedShape {
        num_blocks: 2,
        block_size: 2,
        kv_heads: 1,
        head_dim: 2,
    };
    let (mut kp, mut vp) = (vec![half::f16::ZERO; p.numel()], vec![half::f16::ZERO; p.numel()]);
    is_not_implemented(
        b.paged_append(PagedAppendInput {
            shape: p,
            k_pool: &mut kp,
            v_pool: &mut vp,
            slot_mapping: &[3],
            k: &[1.0, 2.0],
            v: &[3.0, 4.0],
        }),
        "paged_append",
    );
    let cache = suite::scattered_cache(p, &[3], &mut Rng::new(1));
    let dt = DecodeTables::new(&cache, &[0]);
    let q = vec![0.5; 2];
    is_not_implemented(b.paged_decode(&dt.input(&cache, &q, 1)), "paged_decode");
    // Validation still comes first: a bad input is InvalidInput, not NotImplemented.
    assert!(matches!(
        b.paged_decode(&dt.input(&cache, &q, 3)),
        Err(BackendError::InvalidInput(_))
    ));
    // Every lesson turns it into its error message (shown in place of the views), never a panic.
    for l in kvscope::lesson::load_embedded().unwrap() {
        let mut params = lessons::Params::new();
        lessons::normalize(&l, &mut params);
        let e = lessons::compute(&l, &params, &b)
            .err()
            .unwrap_or_else(|| panic!("{} ran", l.id()));
        assert!(
            e.contains("is not implemented on the cuda-sim backend"),
            "{}: {e}",
            l.id()
        );
    }
}
