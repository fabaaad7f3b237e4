//! The paged cache's unit tests.

use super::*;

fn cache(num_blocks: usize, block_size: usize) -> PagedKvCache {
    PagedKvCache::new(PagedShape {
        num_blocks,
        block_size,
        kv_heads: 2,
        head_dim: 3,
        dtype: KvDtype::F16,
    })
}

#[test]
fn allocation_order_mapping_and_free() {
    let mut c = cache(4, 2);
    // the notes' allocator pops from the end: first block is 3.
    let slots = c.append_slots(7, 3).unwrap();
    assert_eq!(c.table(7).unwrap(), &[3, 2]);
    assert_eq!(slots, vec![6, 7, 4]);
    assert_eq!(c.slot(7, 2), Some(2 * 2));
    c.check_invariants().unwrap();
    let st = c.stats(16);
    assert_eq!(
        (
            st.blocks_used,
            st.tokens_stored,
            st.internal_fragmentation,
            st.static_slots
        ),
        (2, 3, 1, 16)
    );
    assert_eq!(c.free_request(7).unwrap(), vec![3, 2]);
    assert_eq!(c.allocator().free_list(), &[0, 1, 3, 2]);
    c.check_invariants().unwrap();
}

#[test]
fn oom_is_typed_and_all_or_nothing() {
    let mut c = cache(2, 4);
    c.append_slots(1, 5).unwrap();
    let err = c.append_slots(2, 5).unwrap_err();
    assert_eq!(
        err,
        OutOfBlocks {
            needed: 2,
            free: 0,
            total: 2
        }
    );
    assert!(c.table(2).is_none());
    c.check_invariants().unwrap();
    c.append_slots(1, 3).unwrap();
    let e = c.append(1, 8, &[0.0; 6], &[0.0; 6]).unwrap_err();
    assert!(e.to_string().contains("OOM"));
}

#[test]
fn append_then_gather_round_trips_through_f16() {
    let mut c = cache(8, 3);
    for pos in 0..7 {
        let k: Vec<f32> = (0..6).map(|i| (pos * 6 + i) as f32).collect();
        c.append(5, pos, &k, &k).unwrap();
    }
    let (k, _) = c.gather(5).unwrap();
    // head 1, pos 4 -> values 24 + 3..6
    assert_eq!(&k[(7 + 4) * 3..(7 + 5) * 3], &[27.0, 28.0, 29.0]);
    assert!(matches!(
        c.append(5, 9, &[0.0; 6], &[0.0; 6]),
        Err(PagedError::Hole { .. })
    ));
    assert_eq!(c.free_request(99), Err(PagedError::UnknownRequest(99)));
}

#[test]
fn block_table_matrix_pads_with_minus_one() {
    let mut c = cache(8, 2);
    c.append_slots(0, 5).unwrap();
    c.append_slots(1, 1).unwrap();
    let (m, maxb, lens) = c.block_table_matrix(&[0, 1]);
    assert_eq!(maxb, 3);
    assert_eq!(m, vec![7, 6, 5, 4, -1, -1]);
    assert_eq!(lens, vec![5, 1]);
}
