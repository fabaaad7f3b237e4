//! What every op's input passes before a backend sees it ([`OpInput`], [`Valid`], the backend's
//! [`Limits`]) and the errors backends give ([`BackendError`]). The op folders' inputs build on this
//! and nothing else of the compute interface, so the `Backend` trait can name them without a cycle.

/// Why a backend call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The inputs do not fit together.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The device or its driver failed.
    #[error("device error: {0}")]
    Device(String),
    /// This backend has no implementation of the op yet (an op can land on the CPU first and get
    /// its CUDA and WGSL twins later).
    #[error("`{op}` is not implemented on the {backend} backend yet")]
    NotImplemented {
        /// The `Backend` method.
        op: &'static str,
        /// The backend's name.
        backend: &'static str,
    },
    /// This backend's kernels have no read path for the pools' KV dtype (`kernels/kv/<dtype>.*`).
    #[error("the {backend} backend has no kernels for {dtype} KV pools yet")]
    UnsupportedDtype {
        /// The dtype's name.
        dtype: &'static str,
        /// The backend's name.
        backend: &'static str,
    },
}

/// The f16 values of a read-only pool view, or the error a backend whose kernels have no read path for
/// the pool's dtype gives (today every GPU-side kernel reads f16 only; the CPU backend reads every dtype
/// through its format).
pub(crate) fn f16_pool<'a>(
    p: crate::cache::PoolRef<'a>,
    backend: &'static str,
) -> Result<&'a [half::f16], BackendError> {
    p.as_f16().ok_or(BackendError::UnsupportedDtype {
        dtype: p.dtype.name(),
        backend,
    })
}

/// [`f16_pool`] for a writable view.
pub(crate) fn f16_pool_mut<'a>(
    p: crate::cache::PoolMut<'a>,
    backend: &'static str,
) -> Result<&'a mut [half::f16], BackendError> {
    let dtype = p.dtype.name();
    p.into_f16().ok_or(BackendError::UnsupportedDtype { dtype, backend })
}

/// Both pools hold the shape's dtype, its `numel` values and its scales.
pub(crate) fn check_pools(s: crate::cache::PagedShape, pools: [crate::cache::PoolRef; 2]) -> Result<(), BackendError> {
    for p in pools {
        if p.dtype != s.dtype {
            return Err(invalid(format!(
                "the shape says {} pools, a pool holds {}",
                s.dtype, p.dtype
            )));
        }
        if p.len() != s.numel() || p.scales.len() != s.num_scales() {
            return Err(invalid(format!(
                "pools must have {} values and {} scales",
                s.numel(),
                s.num_scales()
            )));
        }
    }
    Ok(())
}

pub(crate) fn invalid(msg: impl Into<String>) -> BackendError {
    BackendError::InvalidInput(msg.into())
}

/// The largest head_dim the kernels accept (their shared-memory arrays are sized for it).
pub const MAX_HEAD_DIM: usize = 256;

/// What a backend's kernels can hold, for validation (see [`OpInput`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Floats of shared memory the flash kernel's tiles may take ([`Backend::flash_smem_floats`]).
    pub flash_smem_floats: usize,
}

/// An op's input: what validation checks before any backend sees it.
pub trait OpInput {
    /// Whether the sizes fit together (and fit the backend's `limits`).
    fn validate_for(&self, limits: &Limits) -> Result<(), BackendError>;
    /// Whether the op has nothing to do (no launch at all), e.g. an empty list of copies.
    fn nothing_to_do(&self) -> bool {
        false
    }
}

impl<T: OpInput + ?Sized> OpInput for &T {
    fn validate_for(&self, limits: &Limits) -> Result<(), BackendError> {
        (**self).validate_for(limits)
    }
    fn nothing_to_do(&self) -> bool {
        (**self).nothing_to_do()
    }
}

/// An op input that passed validation. Only validation makes one (`Valid::check` is private to the
/// crate), so a backend's `run_<op>`, which takes it, cannot be reached with unchecked sizes from safe
/// code: the CUDA shim and the kernels index by these sizes.
#[derive(Debug, Clone, Copy)]
pub struct Valid<T>(T);

impl<T: OpInput> Valid<T> {
    /// Validate `inp` against `limits`.
    pub(crate) fn check(inp: T, limits: &Limits) -> Result<Self, BackendError> {
        inp.validate_for(limits)?;
        Ok(Valid(inp))
    }

    /// Whether the op has nothing to do.
    pub fn nothing_to_do(&self) -> bool {
        self.0.nothing_to_do()
    }
}

impl<T> Valid<T> {
    /// The checked input, for a backend that needs it by value (its mutable buffers).
    pub(crate) fn into_inner(self) -> T {
        self.0
    }

    /// A part of the checked input that the check covered (the quantised ops' inner paged input).
    pub(crate) fn project<U>(self, f: impl FnOnce(T) -> U) -> Valid<U> {
        Valid(f(self.0))
    }

    /// A borrow of the checked input, still checked.
    pub(crate) fn as_ref(&self) -> Valid<&T> {
        Valid(&self.0)
    }
}

impl<T> std::ops::Deref for Valid<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
