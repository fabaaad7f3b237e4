//! The one list of backends ([`backend_list!`]) and the [`BackendKind`] enum made from it, which the
//! `Backend` trait returns. The list's probes and kernel sources become [`super::BACKENDS`] in
//! `backends.rs`; this file uses only the variants and names, so it sits below every backend.

/// The list of backends: each row names the variant, its name in the UI/CLI/saved state, and its
/// `BackendInfo` fields. Calls `$callback!` with the rows, so the enum (`kind.rs`) and [`BACKENDS`]
/// (here) come from the one list.
macro_rules! backend_list {
    ($callback:ident) => {
        $callback! {
            /// Rust on the CPU (f32, rayon); the reference path.
            Cpu = "cpu" {
                probe: $crate::compute::cpu::probe,
                slow_probe: false,
                simulated: false,
                kernel_source: |_| None,
                ran: [
                    "the CPU backend ran the same op in Rust; choose cuda or cuda-sim to run this source, wgpu for its WGSL twin",
                    "CPU 后端用 Rust 计算同一运算；选择 cuda 或 cuda-sim 运行这份源码，选择 wgpu 运行它的 WGSL 孪生版本",
                ],
            }
            /// NVIDIA GPU through cudarc + NVRTC.
            Cuda = "cuda" {
                probe: $crate::compute::cuda::probe_backend,
                slow_probe: true,
                simulated: false,
                kernel_source: $crate::compute::cuda::sources::kernel_source,
                ran: ["ran on the GPU through NVRTC + cudarc", "经 NVRTC + cudarc 在 GPU 上运行"],
            }
            /// The same `.cu` sources run on CPU threads by the C++ shim (small shapes only).
            CudaSim = "cuda-sim" {
                probe: $crate::compute::cuda::probe_sim,
                slow_probe: false,
                simulated: true,
                kernel_source: $crate::compute::cuda::sources::kernel_source,
                ran: [
                    "this exact source ran on CPU threads (cuda-sim shim)",
                    "这份源码在 CPU 线程上运行（cuda-sim 模拟）",
                ],
            }
            /// The WGSL twins of the kernels on any GPU wgpu drives (Vulkan, Metal, DX12; lavapipe too).
            Wgpu = "wgpu" {
                probe: $crate::compute::wgpu::probe_backend,
                slow_probe: true,
                simulated: false,
                kernel_source: $crate::compute::wgpu::kernel_source,
                ran: [
                    "this WGSL twin ran through wgpu on the adapter in the status bar",
                    "这份 WGSL 孪生 kernel 经 wgpu 在状态栏所示的适配器上运行",
                ],
            }
        }
    };
}
pub(crate) use backend_list;

/// The enum of the list (the rows' fields are for [`super::BACKENDS`]).
macro_rules! backend_kinds {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal { $($field:ident: $value:expr),* $(,)? } )*) => {
        /// The backends kvscope knows.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
        pub enum BackendKind {
            $( $(#[$doc])* #[serde(rename = $name)] #[value(name = $name)] $variant, )*
        }

        impl BackendKind {
            /// Every kind, in the order the UI lists them.
            pub const ALL: [BackendKind; [$($name),*].len()] = [$(BackendKind::$variant),*];

            /// Short name.
            pub fn name(self) -> &'static str {
                match self {
                    $(BackendKind::$variant => $name,)*
                }
            }
        }
    };
}

backend_list!(backend_kinds);
