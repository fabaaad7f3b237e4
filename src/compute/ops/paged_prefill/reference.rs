//! The f64 oracle of `paged_prefill`.

use super::*;

/// The f64 reference: each row's causal attention over its request's cache, gathered through the table.
pub fn reference(inp: &PagedPrefillInput) -> Vec<f64> {
    let rows = inp.row_map();
    let mut tables = Vec::new();
    crate::compute::ops::paged_decode::reference::paged_decode(&inp.as_decode(&rows, &mut tables))
}
