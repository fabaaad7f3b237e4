//! Builds the CUDA-on-CPU shim: the real `kernels/*.cu` files compiled as C++20 with
//! `kernels/shim/cuda_shim.h`, linked into kvscope as the `cuda-sim` backend.

fn main() {
    for f in [
        "kernels/attention.cu",
        "kernels/kv_cache.cu",
        "kernels/paged_attention.cu",
        "kernels/shim",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    cc::Build::new()
        .cpp(true)
        .std("c++20")
        .file("kernels/shim/sim.cpp")
        .include("kernels/shim")
        .include("kernels")
        .flag_if_supported("-pthread")
        .opt_level(2)
        .warnings(false)
        .compile("kvscope_cuda_sim");
    println!("cargo:rustc-link-lib=pthread");
}
