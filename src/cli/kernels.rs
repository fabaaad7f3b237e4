//! `kvscope kernels list|ptx`: which op lives in which kernel file, and the PTX NVRTC makes of them.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Subcommand;
use kvscope::compute;

#[derive(Subcommand)]
pub enum KernelsCmd {
    /// Each op with its kernel file, entry points and source line.
    List,
    /// Compile every kernels/*.cu with NVRTC to DIR/<file>.ptx.
    Ptx {
        /// NVRTC virtual architecture, e.g. compute_80 or compute_90.
        #[arg(long, default_value = "compute_90")]
        arch: String,
        #[arg(long)]
        out: PathBuf,
    },
    /// Which NVRTC the CUDA backend would load: the library names tried in order, the version and file
    /// loaded, and the folders searched for cuda_fp16.h. Exits non-zero when NVRTC or the header is missing.
    Nvrtc,
}

/// Run `kvscope kernels …`.
pub fn run(cmd: KernelsCmd) -> Result<bool> {
    match cmd {
        KernelsCmd::List => {
            use compute::cuda::sources;
            for op in compute::Kernel::ALL {
                let f = sources::file_of(op);
                for entry in op.cuda_entries() {
                    let line = sources::entry_line(&f, entry).unwrap_or(0);
                    outln!("{:20} kernels/{}:{line:<5} {entry}", format!("{op:?}"), f.file);
                }
            }
            Ok(true)
        }
        KernelsCmd::Nvrtc => {
            use compute::cuda;
            outln!("library names tried, in order: {}", cuda::nvrtc_names().join(" "));
            let loaded = cuda::nvrtc_loaded();
            match &loaded {
                Ok(what) => outln!("loaded: {what}"),
                Err(why) => outln!("not loaded: {why}"),
            }
            let dirs = cuda::include_dirs();
            if dirs.is_empty() {
                outln!("cuda_fp16.h: not found (set KVSCOPE_CUDA_INCLUDE, CUDA_HOME or CUDA_PATH)");
            } else {
                outln!("cuda_fp16.h from: {}", dirs.join(" "));
            }
            Ok(loaded.is_ok() && !dirs.is_empty())
        }
        KernelsCmd::Ptx { arch, out } => {
            if let Ok(what) = compute::cuda::nvrtc_loaded() {
                outln!(
                    "compiling with {what}, headers from {}",
                    compute::cuda::include_dirs().join(" ")
                );
            }
            std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
            for f in compute::cuda::sources::files() {
                let ptx = compute::cuda::compile(&f, &arch).map_err(|log| anyhow::anyhow!(log))?;
                let path = out.join(f.file.replace(".cu", ".ptx"));
                std::fs::write(&path, ptx.to_src()).with_context(|| format!("cannot write {}", path.display()))?;
                outln!("wrote {}", path.display());
            }
            Ok(true)
        }
    }
}
