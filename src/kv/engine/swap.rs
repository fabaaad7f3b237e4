//! Swapping a request's blocks to another engine and back (vLLM V0's swap space), both kinds of cache.

use super::*;

impl KvEngine {
    /// Swap `req` out to `host` (an engine of the same block geometry standing for CPU memory, vLLM V0's
    /// swap space): its blocks' K/V (and scales) are copied, layer by layer, into blocks `host` allocates
    /// for it under the same id, then its blocks here are freed. Returns the bytes copied. On this machine
    /// both pools are host memory, so the swap is a host copy; on a GPU it would cross PCIe.
    pub fn swap_out(&mut self, req: RequestId, host: &mut KvEngine) -> Result<usize, EngineError> {
        let len = self.cache.len(req);
        let table = self.cache.table(req).map(<[u32]>::to_vec).unwrap_or_default();
        if table.is_empty() {
            return Err(EngineError::Layout(format!(
                "request {req} holds no blocks to swap out"
            )));
        }
        let bytes = self.move_blocks(req, len, &table, host)?;
        self.free(req)?;
        Ok(bytes)
    }

    /// Swap `req` back in from `host`: blocks are allocated here for its tokens, its K/V copied back from
    /// `host`, and `host`'s blocks freed. Returns the bytes copied; the K/V are bit for bit those swapped
    /// out, in new blocks.
    pub fn swap_in(&mut self, req: RequestId, host: &mut KvEngine) -> Result<usize, EngineError> {
        let len = host.cache.len(req);
        let table = host.cache.table(req).map(<[u32]>::to_vec).unwrap_or_default();
        if table.is_empty() {
            return Err(EngineError::Layout(format!("request {req} is not swapped out")));
        }
        let bytes = host.move_blocks(req, len, &table, self)?;
        host.free(req)?;
        Ok(bytes)
    }

    /// Give `req` `len` slots in `dst` and copy its blocks `table` there, every layer.
    fn move_blocks(&self, req: RequestId, len: usize, table: &[u32], dst: &mut KvEngine) -> Result<usize, EngineError> {
        let (s, d) = (self.shape(), dst.shape());
        if (s.block_size, s.kv_heads, s.head_dim, s.dtype) != (d.block_size, d.kv_heads, d.head_dim, d.dtype)
            || self.layers() != dst.layers()
            || self.layout != dst.layout
        {
            return Err(EngineError::Layout(
                "a swap needs two pools of the same block geometry".into(),
            ));
        }
        if dst.cache.table(req).is_some() {
            return Err(EngineError::Layout(format!("request {req} already holds blocks there")));
        }
        dst.reserve(req, len).map_err(PagedError::from)?;
        let to = dst.cache.table(req).map(<[u32]>::to_vec).unwrap_or_default();
        if self.layout == PoolLayout::Grouped {
            return self.move_group_blocks(req, table, &to, dst);
        }
        let mut bytes = 0;
        for l in 0..self.layers() {
            let (sk, sv) = self.pools(l)?;
            let (sk, sv) = ((sk.bytes, sk.scales), (sv.bytes, sv.scales));
            let (mut dk, mut dv) = dst.pools_mut(l)?;
            for (src, dpool) in [(sk, &mut dk), (sv, &mut dv)] {
                if src.0.is_empty() {
                    continue;
                }
                let per = src.0.len() / s.numel().max(1);
                let block = s.index(1, 0, 0, 0) * per;
                for (&a, &b) in table.iter().zip(&to) {
                    let (a, b) = (a as usize, b as usize);
                    dpool.bytes[b * block..(b + 1) * block].copy_from_slice(&src.0[a * block..(a + 1) * block]);
                    bytes += block;
                    for h in 0..s.kv_heads {
                        for o in 0..s.block_size {
                            let (ra, rb) = (s.row_scales(a, h, o), d.row_scales(b, h, o));
                            dpool.scales[rb].copy_from_slice(&src.1[ra]);
                        }
                    }
                }
            }
        }
        Ok(bytes)
    }
}
