//! The ops every backend implements: one folder each, and one table ([`op_table!`]) that lists them.
//!
//! An op is one [`super::Backend`] method. Its folder `ops/<op>/` holds the input struct and its
//! `validate`, the suite cases, the f64 reference (`reference.rs`), the launch geometry of its kernels
//! (`launch.rs`), and one file per backend that implements it (`cpu.rs`, `wgpu.rs`, and `cuda.rs` for
//! both CUDA backends). Its kernels live in `kernels/<file>.cu` and `kernels/<file>.wgsl`, with entry points of
//! the same names on both sides.
//!
//! The table is the one list: the [`Op`] and [`Kernel`] enums, the `Backend` trait's op methods (the
//! validating wrapper and the "not implemented" default), every backend's dispatch into the op folders,
//! the cross-backend suite and the lists the tests iterate all come from it. A row that names a
//! folder without one of its three backend files does not compile; see ARCHITECTURE.md, "How to add an
//! op".

pub mod attention;
pub mod attention_fused;
pub mod copy_blocks;
pub(crate) mod decode_row;
pub mod flash;
pub mod group_append;
pub mod group_decode;
pub mod mla_decode;
pub mod paged_append;
pub mod paged_decode;
pub mod paged_prefill;
pub mod quant_append;
pub mod quant_decode;
pub mod rope;
pub mod score_decode;
pub mod static_append;
pub mod stream_decode;

/// The op table. Calls `$callback! { [$args] rows… }` with every row, so each consumer (the enums,
/// the `Backend` trait, the backends' dispatch, the suite) is a macro that reads the same rows.
///
/// A row: the op's variant and documentation; `module`, its folder under `ops/`; `method` and `run`,
/// the validating `Backend` method and the one backends implement; `input` and `output` types;
/// `file`, the kernel files' stem under `kernels/` (`.cu` and `.wgsl`); `pools`, the pool snippet (of the
/// pools' KV dtype) its WGSL needs in front of it (`None`, `Read` or `Write`, see `compute::wgpu::Pools`); `kernels`, what
/// the kernel panel shows (a [`Kernel`] each), every one with its entry points in launch order.
macro_rules! op_table {
    ($callback:ident $([$($args:tt)*])?) => {
        $crate::compute::ops::$callback! {
            [$($($args)*)?]
            /// Attention forward returning scores, probabilities and per-head output (three kernels).
            Attention {
                module: attention,
                method: attention,
                run: run_attention,
                input: &$crate::compute::AttnInput,
                output: $crate::math::AttnCore<f32>,
                file: "attention",
                pools: None,
                kernels: {
                    /// Scaled, masked scores `Q·Kᵀ/√hd`.
                    AttentionScores: ["attention_scores_f32"],
                    /// Row softmax.
                    Softmax: ["softmax_rows_f32"],
                    /// `P·V`.
                    AttentionPv: ["attention_pv_f32"],
                }
            }
            /// Fused attention forward (online softmax, one kernel): only the output `[H,T,hd]`.
            AttentionFused {
                module: attention_fused,
                method: attention_fused,
                run: run_attention_fused,
                input: &$crate::compute::AttnInput,
                output: ::ndarray::Array3<f32>,
                file: "attention",
                pools: None,
                kernels: {
                    /// Scores, softmax and P·V in one kernel (online softmax).
                    AttentionFused: ["attention_fused_f32"],
                }
            }
            /// Write one token of one layer into a static cache.
            StaticCacheAppend {
                module: static_append,
                method: static_cache_append,
                run: run_static_cache_append,
                input: $crate::compute::StaticAppendInput,
                output: (),
                file: "kv_cache",
                pools: Write,
                kernels: {
                    /// Write one token's K/V into the static cache.
                    StaticCacheAppend: ["static_cache_append_f16"],
                }
            }
            /// Write tokens into the paged pools through their slot mapping (negative slots are skipped).
            PagedAppend {
                module: paged_append,
                method: paged_append,
                run: run_paged_append,
                input: $crate::compute::PagedAppendInput,
                output: (),
                file: "kv_cache",
                pools: Write,
                kernels: {
                    /// Write tokens' K/V into the paged pools through a slot mapping.
                    PagedAppend: ["paged_append_f16"],
                }
            }
            /// Paged decode attention, reading through the block tables. Returns `[R, H, hd]`.
            PagedDecode {
                module: paged_decode,
                method: paged_decode,
                run: run_paged_decode,
                input: &$crate::compute::PagedDecodeInput,
                output: Vec<f32>,
                file: "paged_attention",
                pools: Read,
                kernels: {
                    /// One query token per request, reading K/V through the block tables.
                    PagedDecode: ["paged_attention_decode_f16", "paged_attention_reduce_f32"],
                }
            }
            /// Copy whole blocks of the pools, `(src, dst)` pairs (copy-on-write).
            CopyBlocks {
                module: copy_blocks,
                method: copy_blocks,
                run: run_copy_blocks,
                input: $crate::compute::CopyBlocksInput,
                output: (),
                file: "kv_cache",
                pools: Write,
                kernels: {
                    /// Whole-block copies in the paged pools (copy-on-write).
                    CopyBlocks: ["copy_blocks_f16"],
                }
            }
            /// FlashAttention's tiled forward pass: only the output `[H,T,hd]`.
            FlashAttention {
                module: flash,
                method: flash_attention,
                run: run_flash_attention,
                input: &$crate::compute::FlashInput,
                output: ::ndarray::Array3<f32>,
                file: "flash_attention",
                pools: None,
                kernels: {
                    /// FlashAttention's tiled forward pass (Br query rows per block, Bc-key tiles in
                    /// shared memory).
                    FlashAttention: ["flash_attention_f32"],
                }
            }
            /// Rotary position embeddings on rows `[N, heads, hd]`, each at its own position. Returns
            /// `[N, heads, hd]`.
            Rope {
                module: rope,
                method: rope,
                run: run_rope,
                input: &$crate::compute::ops::rope::RopeInput,
                output: Vec<f32>,
                file: "rope",
                pools: None,
                kernels: {
                    /// RoPE, "rotate half" layout, at a position per row.
                    Rope: ["rope_f32"],
                }
            }
            /// Decode attention for a bounded streaming cache: keys stored before RoPE and turned on read
            /// at positions the caller picks (−1 masks a token). Returns the output and each head's weights.
            StreamDecode {
                module: stream_decode,
                method: stream_decode,
                run: run_stream_decode,
                input: &$crate::compute::ops::stream_decode::StreamDecodeInput,
                output: $crate::compute::ops::stream_decode::StreamDecodeOut,
                file: "stream_attention",
                pools: Read,
                kernels: {
                    /// One query per request over the paged cache, RoPE on read, masked slots skipped.
                    StreamDecode: ["stream_decode_f16"],
                }
            }
            /// Paged decode that also returns the attention weights, summed per KV head over its query group,
            /// with a validity mask per (KV head, slot) (token-level eviction: H2O, SnapKV).
            ScoreDecode {
                module: score_decode,
                method: score_decode,
                run: run_score_decode,
                input: &$crate::compute::ops::score_decode::ScoreDecodeInput,
                output: $crate::compute::ops::score_decode::ScoreDecodeOut,
                file: "score_attention",
                pools: Read,
                kernels: {
                    /// One query per request over the paged cache, evicted slots skipped per KV head; writes
                    /// the weights and their group sums.
                    ScoreDecode: ["score_decode_f16"],
                }
            }
            /// Write tokens into 8-bit pools (INT8 per token, FP8 E4M3/E5M2) through their slot mapping:
            /// codes and scales.
            QuantAppend {
                module: quant_append,
                method: quant_append,
                run: run_quant_append,
                input: $crate::compute::ops::quant_append::QuantAppendInput,
                output: (),
                file: "quant_kv",
                pools: None,
                kernels: {
                    /// Quantise tokens' K/V rows into 8-bit codes (and INT8's scales) at their slots.
                    QuantAppend: ["quant_append_u8"],
                }
            }
            /// Paged decode over 8-bit pools: codes and scales read through the block tables, dequantised
            /// in registers. Returns `[R, H, hd]`.
            QuantDecode {
                module: quant_decode,
                method: quant_decode,
                run: run_quant_decode,
                input: &$crate::compute::ops::quant_decode::QuantDecodeInput,
                output: Vec<f32>,
                file: "quant_kv",
                pools: None,
                kernels: {
                    /// One query per request over 8-bit K/V codes and their scales.
                    QuantDecode: ["quant_decode_u8"],
                }
            }
            /// Store new rows in a group-quantised cache's f16 rings, then quantise the groups that completed
            /// (INT8 per channel, KIVI): codes, scales and zero points.
            GroupAppend {
                module: group_append,
                method: group_append,
                run: run_group_append,
                input: $crate::compute::ops::group_append::GroupAppendInput,
                output: (),
                file: "group_kv",
                pools: None,
                kernels: {
                    /// New K/V rows into the requests' f16 rings (the residual).
                    GroupStore: ["group_store_f16"],
                    /// Quantise completed groups: K per channel, V per channel or per token.
                    GroupQuant: ["group_quant"],
                }
            }
            /// Paged decode over a group-quantised cache: packed 2/4/8-bit codes with scales and zero
            /// points through the block tables, and the f16 ring for the tokens not yet quantised. Returns
            /// `[R, H, hd]`.
            GroupDecode {
                module: group_decode,
                method: group_decode,
                run: run_group_decode,
                input: &$crate::compute::ops::group_decode::GroupDecodeInput,
                output: Vec<f32>,
                file: "group_kv",
                pools: None,
                kernels: {
                    /// One query per request over grouped codes and the f16 residual.
                    GroupDecode: ["group_decode"],
                }
            }
            /// Multi-head latent attention decode (MLA) over a paged latent cache, projections absorbed:
            /// scores `q̃ · c_KV + q_R · k_R`, output `Σ p · c_KV` in latent space. Returns `[R, H, d_c]`.
            MlaDecode {
                module: mla_decode,
                method: mla_decode,
                run: run_mla_decode,
                input: &$crate::compute::ops::mla_decode::MlaDecodeInput,
                output: Vec<f32>,
                file: "mla_attention",
                pools: Read,
                kernels: {
                    /// One query per (head, request) over the cached latent rows; K and V never expanded.
                    MlaDecode: ["mla_decode_f16"],
                }
            }
            /// Attention of a chunk of new tokens per request over the paged cache, causal within the
            /// chunk (chunked prefill, speculative verification). Returns `[Q, H, hd]`.
            PagedPrefill {
                module: paged_prefill,
                method: paged_prefill,
                run: run_paged_prefill,
                input: &$crate::compute::ops::paged_prefill::PagedPrefillInput,
                output: Vec<f32>,
                file: "paged_attention",
                pools: Read,
                kernels: {
                    /// One query row per (KV head, row, partition), the decode's body, then the reduce.
                    PagedPrefill: ["paged_prefill_f16", "paged_attention_reduce_f32"],
                }
            }
        }
    };
}
pub(crate) use op_table;

/// The enums of the table: [`Op`] (one per `Backend` method) and [`Kernel`] (one per kernel-panel
/// entry).
macro_rules! op_enums {
    ([] $(
        $(#[$doc:meta])*
        $Op:ident {
            module: $module:ident,
            method: $method:ident,
            run: $run:ident,
            input: $input:ty,
            output: $output:ty,
            file: $file:literal,
            pools: $pools:ident,
            kernels: { $( $(#[$kdoc:meta])* $Kernel:ident: [$($entry:literal),+ $(,)?] ),+ $(,)? }
        }
    )*) => {
        /// One op: a `Backend` method, with its folder `ops/<op>/`, its kernel file and its kernels.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
        pub enum Op {
            $( $(#[$doc])* $Op, )*
        }

        impl Op {
            /// Every op, in table order.
            pub const ALL: [Op; [$(Op::$Op),*].len()] = [$(Op::$Op),*];

            /// The `Backend` method (and the op's name in messages).
            pub fn name(self) -> &'static str {
                match self {
                    $(Op::$Op => stringify!($method),)*
                }
            }

            /// Its folder under `src/compute/ops/`.
            pub fn folder(self) -> &'static str {
                match self {
                    $(Op::$Op => stringify!($module),)*
                }
            }

            /// The stem of its kernel files: `kernels/<stem>.cu` and `kernels/<stem>.wgsl`.
            pub fn file_stem(self) -> &'static str {
                match self {
                    $(Op::$Op => $file,)*
                }
            }

            /// What the kernel panel shows of it.
            pub fn kernels(self) -> &'static [Kernel] {
                match self {
                    $(Op::$Op => &[$(Kernel::$Kernel),+],)*
                }
            }

            /// Every entry point it launches, in launch order (CUDA and WGSL share the names).
            pub fn entries(self) -> Vec<&'static str> {
                self.kernels().iter().flat_map(|k| k.cuda_entries().iter().copied()).collect()
            }

            /// Its CUDA source: `(file name, path from the repository root, text)`, embedded.
            pub fn cuda_source(self) -> (&'static str, &'static str, &'static str) {
                match self {
                    $(Op::$Op => (
                        concat!($file, ".cu"),
                        concat!("kernels/", $file, ".cu"),
                        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/", $file, ".cu")),
                    ),)*
                }
            }

            /// Its WGSL twin: `(file name, path from the repository root, text)`, embedded.
            pub fn wgsl_source(self) -> (&'static str, &'static str, &'static str) {
                match self {
                    $(Op::$Op => (
                        concat!($file, ".wgsl"),
                        concat!("kernels/", $file, ".wgsl"),
                        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/", $file, ".wgsl")),
                    ),)*
                }
            }

            /// The f16 pool snippet its WGSL file needs in front of it.
            pub fn wgsl_pools(self) -> $crate::compute::wgpu::Pools {
                match self {
                    $(Op::$Op => $crate::compute::wgpu::Pools::$pools,)*
                }
            }
        }

        /// One entry of the kernel panel: a kernel (or a kernel and its second pass) of one op.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
        pub enum Kernel {
            $( $( $(#[$kdoc])* $Kernel, )+ )*
        }

        impl Kernel {
            /// Every kernel, in table order.
            pub const ALL: [Kernel; [$($(Kernel::$Kernel),+),*].len()] = [$($(Kernel::$Kernel),+),*];

            /// The op it belongs to.
            pub fn op(self) -> Op {
                match self {
                    $( $(Kernel::$Kernel => Op::$Op,)+ )*
                }
            }

            /// The `extern "C"` entry points that implement it, in launch order (the WGSL twins have
            /// the same names).
            pub fn cuda_entries(self) -> &'static [&'static str] {
                match self {
                    $( $(Kernel::$Kernel => &[$($entry),+],)+ )*
                }
            }

            /// The file under `kernels/` that holds its CUDA source.
            pub fn kernel_file(self) -> &'static str {
                match self.op() {
                    $(Op::$Op => concat!($file, ".cu"),)*
                }
            }

            /// The file under `kernels/` that holds its WGSL twin.
            pub fn wgsl_file(self) -> &'static str {
                match self.op() {
                    $(Op::$Op => concat!($file, ".wgsl"),)*
                }
            }
        }
    };
}
pub(crate) use op_enums;
op_table!(op_enums);

/// The `Backend` trait's op methods: for each row, `run_<op>` (what a backend implements; by default
/// "not implemented on <backend>") and `<op>` (what callers use: it validates the input into a
/// [`super::Valid`] first).
macro_rules! backend_methods {
    ([] $(
        $(#[$doc:meta])*
        $Op:ident {
            module: $module:ident,
            method: $method:ident,
            run: $run:ident,
            input: $input:ty,
            output: $output:ty,
            file: $file:literal,
            pools: $pools:ident,
            kernels: { $($kernels:tt)* }
        }
    )*) => {
        $(
            $(#[$doc])*
            ///
            /// Implemented by the backends in `ops/` (the table's folder); reached only through the
            /// validating method, since only validation makes a [`Valid`] input.
            fn $run(&self, _inp: Valid<$input>) -> Result<$output, BackendError> {
                Err(self.not_implemented(Op::$Op))
            }

            $(#[$doc])*
            ///
            /// Validates the input first, so no backend (and no kernel) sees inconsistent sizes.
            fn $method(&self, inp: $input) -> Result<$output, BackendError> {
                let inp = Valid::check(inp, &self.limits())?;
                if inp.nothing_to_do() {
                    return Ok(Default::default());
                }
                self.$run(inp)
            }
        )*
    };
}
pub(crate) use backend_methods;

/// A backend's dispatch of every op into its file in the op's folder: inside `impl Backend for X`,
/// `op_table!(impl_backend_ops [cpu])` makes `run_<op>` call `ops::<op>::cpu::run`. A
/// folder without the backend's file, or a file without `run`, does not compile.
macro_rules! impl_backend_ops {
    ([$backend:ident] $(
        $(#[$doc:meta])*
        $Op:ident {
            module: $module:ident,
            method: $method:ident,
            run: $run:ident,
            input: $input:ty,
            output: $output:ty,
            file: $file:literal,
            pools: $pools:ident,
            kernels: { $($kernels:tt)* }
        }
    )*) => {
        $(
            fn $run(
                &self,
                inp: $crate::compute::Valid<$input>,
            ) -> Result<$output, $crate::compute::BackendError> {
                $crate::compute::ops::$module::$backend::run(self, inp)
            }
        )*
    };
}
pub(crate) use impl_backend_ops;

/// The cross-backend suite: every row's `ops::<op>::suite`.
macro_rules! suite_fns {
    ([] $(
        $(#[$doc:meta])*
        $Op:ident {
            module: $module:ident,
            method: $method:ident,
            run: $run:ident,
            input: $input:ty,
            output: $output:ty,
            file: $file:literal,
            pools: $pools:ident,
            kernels: { $($kernels:tt)* }
        }
    )*) => {
        /// The suite of `op` on `b` against the reference (random seeded inputs, odd shapes).
        pub fn suite(op: Op, b: &dyn super::Backend, seed: u64, out: &mut Vec<super::CheckReport>) {
            match op {
                $(Op::$Op => $module::suite(b, seed, out),)*
            }
        }

        /// `op` on `b` for a few fixed seeded inputs, every output flattened: the registry test runs it
        /// on a backend that implements nothing, the twin test on every pair of backends that can run it.
        pub fn probe(op: Op, b: &dyn super::Backend, seed: u64) -> Result<Vec<f64>, super::BackendError> {
            match op {
                $(Op::$Op => $module::probe(b, seed),)*
            }
        }

        /// How closely two backends' [`probe`] outputs of `op` must agree: bit for bit for appends and
        /// copies, the checker's f32 tolerance for arithmetic.
        pub fn twin_tolerance(op: Op) -> super::Tolerance {
            match op {
                $(Op::$Op => $module::TWIN_TOLERANCE,)*
            }
        }
    };
}
pub(crate) use suite_fns;
op_table!(suite_fns);
