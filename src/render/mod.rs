//! wgpu renderers for attention heatmaps, the paged block pool and the static-cache memory strip.
//!
//! How it works: each renderer `X` (`heatmap`, `blocks`, `strip`) pairs with `shaders/X.wgsl`, as
//! rerun's re_renderer does. A renderer owns its pipeline and one GPU instance per view id (data
//! texture, uniform buffer, bind group). Data is uploaded only when its generation changes; every
//! frame only rewrites a small uniform block. Each renderer draws one full-viewport triangle into the
//! viewport it is given, so the same code runs
//! - inside egui, through `egui_wgpu` paint callbacks ([`egui_glue`]), and
//! - offscreen into a texture that is read back and written as PNG ([`offscreen`]).
//!
//! No shader reads a storage buffer: values, block tables and colour tables are textures, which the
//! GL backend (egui-wgpu's WebGL2-level limits) supports as well as Vulkan.

pub mod blocks;
pub mod colormap;
pub mod demo;
pub mod egui_glue;
pub mod heatmap;
pub mod offscreen;
pub mod strip;
pub mod text;

pub use eframe::egui_wgpu::wgpu;

/// Every WGSL file of the project, by name, for validation and for pipelines.
pub const SHADERS: [(&str, &str); 4] = [
    ("heatmap.wgsl", include_str!("../../shaders/heatmap.wgsl")),
    ("maxpool.wgsl", include_str!("../../shaders/maxpool.wgsl")),
    ("blocks.wgsl", include_str!("../../shaders/blocks.wgsl")),
    ("strip.wgsl", include_str!("../../shaders/strip.wgsl")),
];

fn shader_source(name: &str) -> &'static str {
    SHADERS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
        .expect("shader is embedded")
}

/// A device and queue without a window (tests, `kvscope render`, benchmarks).
pub struct Gpu {
    /// The device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// Which adapter (name, backend, type).
    pub info: wgpu::AdapterInfo,
}

impl Gpu {
    /// A headless device on the backends `WGPU_BACKEND` names (all by default). Software adapters
    /// (llvmpipe, lavapipe) are fine. Errors say what is missing.
    pub fn headless() -> Result<Gpu, String> {
        Self::with_backends(wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all()))
    }

    /// A headless device restricted to `backends`, with the adapter's own limits.
    pub fn with_backends(backends: wgpu::Backends) -> Result<Gpu, String> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = backends;
        let instance = wgpu::Instance::new(desc);
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
            .map_err(|e| format!("no wgpu adapter on {backends:?}: {e} (install mesa-vulkan-drivers for lavapipe, or Mesa's EGL for llvmpipe)"))?;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("kvscope headless"),
            required_limits: adapter.limits(),
            ..Default::default()
        }))
        .map_err(|e| format!("could not open the wgpu device: {e}"))?;
        Ok(Gpu {
            device,
            queue,
            info: adapter.get_info(),
        })
    }
}

/// A render pipeline that draws one full-viewport triangle from `vs_main`/`fs_main` of `shader`.
pub(crate) fn fullscreen_pipeline(
    device: &wgpu::Device,
    shader: &str,
    layout: &wgpu::BindGroupLayout,
    format: wgpu::TextureFormat,
) -> wgpu::RenderPipeline {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(shader),
        source: wgpu::ShaderSource::Wgsl(shader_source(shader).into()),
    });
    let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(shader),
        bind_group_layouts: &[Some(layout)],
        immediate_size: 0,
    });
    device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some(shader),
        layout: Some(&pl),
        vertex: wgpu::VertexState {
            module: &module,
            entry_point: Some("vs_main"),
            buffers: &[],
            compilation_options: Default::default(),
        },
        fragment: Some(wgpu::FragmentState {
            module: &module,
            entry_point: Some("fs_main"),
            targets: &[Some(format.into())],
            compilation_options: Default::default(),
        }),
        primitive: wgpu::PrimitiveState::default(),
        depth_stencil: None,
        multisample: wgpu::MultisampleState::default(),
        multiview_mask: None,
        cache: None,
    })
}

/// A bind group layout entry for the fragment stage.
pub(crate) fn frag_entry(binding: u32, ty: wgpu::BindingType) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::FRAGMENT,
        ty,
        count: None,
    }
}

pub(crate) const UNIFORM: wgpu::BindingType = wgpu::BindingType::Buffer {
    ty: wgpu::BufferBindingType::Uniform,
    has_dynamic_offset: false,
    min_binding_size: None,
};

pub(crate) fn tex_binding(sample_type: wgpu::TextureSampleType) -> wgpu::BindingType {
    wgpu::BindingType::Texture {
        sample_type,
        view_dimension: wgpu::TextureViewDimension::D2,
        multisampled: false,
    }
}

/// A uniform buffer of `size` bytes at binding 0 and `textures` at bindings 1, 2, …, bound with
/// `layout`: the per-view GPU state every renderer keeps.
pub(crate) fn uniform_bind_group(
    device: &wgpu::Device,
    layout: &wgpu::BindGroupLayout,
    label: &str,
    size: usize,
    textures: &[&wgpu::TextureView],
) -> (wgpu::Buffer, wgpu::BindGroup) {
    let uniform = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size as u64,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut entries = vec![wgpu::BindGroupEntry {
        binding: 0,
        resource: uniform.as_entire_binding(),
    }];
    for (i, t) in textures.iter().enumerate() {
        entries.push(wgpu::BindGroupEntry {
            binding: i as u32 + 1,
            resource: wgpu::BindingResource::TextureView(t),
        });
    }
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some(label),
        layout,
        entries: &entries,
    });
    (uniform, bind_group)
}

/// An RGBA8 texture of `width × height` from `rgba` bytes (colour tables).
pub(crate) fn rgba_texture(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    label: &str,
    width: u32,
    height: u32,
    rgba: &[u8],
) -> wgpu::TextureView {
    let size = wgpu::Extent3d {
        width,
        height,
        depth_or_array_layers: 1,
    };
    let tex = device.create_texture(&wgpu::TextureDescriptor {
        label: Some(label),
        size,
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba8Unorm,
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    });
    queue.write_texture(
        tex.as_image_copy(),
        rgba,
        wgpu::TexelCopyBufferLayout {
            offset: 0,
            bytes_per_row: Some(width * 4),
            rows_per_image: None,
        },
        size,
    );
    tex.create_view(&Default::default())
}

/// A colour as the shaders take it.
pub fn rgba(c: [u8; 4]) -> [f32; 4] {
    c.map(|x| x as f32 / 255.0)
}

/// A rectangle in framebuffer pixels: x0, y0, width, height.
pub type PxRect = [f32; 4];
