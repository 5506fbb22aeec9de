//! A Rust program on cudarc's safe API: two streams, a kernel from PTX text, events that
//! cudarc records and waits on by itself, a copy back. It runs unchanged on a GPU and on
//! the stand-in driver. Usage: streamsan-cudarc-app [LAUNCHES] [--racy]
//!
//! `--racy` turns cudarc's event tracking off (an unsafe call that makes the program
//! responsible for ordering its streams) and then does not order them: the consumer reads
//! what the producer allocated and copied without waiting for it.

use cudarc::driver::{CudaContext, DriverError, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;

/// `scale(out, in, n)`: out[i] = 2 * in[i].
const SCALE_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64
.visible .entry scale(
    .param .u64 scale_param_0,
    .param .u64 scale_param_1,
    .param .u32 scale_param_2
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [scale_param_0];
    ld.param.u64 %rd2, [scale_param_1];
    ld.param.u32 %r2, [scale_param_2];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.s32 %p1, %r1, %r2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.s32 %rd5, %r1, 4;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.f32 %f1, [%rd6];
    add.f32 %f2, %f1, %f1;
    add.s64 %rd7, %rd3, %rd5;
    st.global.f32 [%rd7], %f2;
DONE:
    ret;
}
"#;

fn main() -> Result<(), DriverError> {
    let launches: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let racy = std::env::args().any(|a| a == "--racy");
    let ctx = CudaContext::new(0)?;
    if racy {
        // SAFETY: this program takes over the ordering of its streams (and leaves it out).
        unsafe { ctx.disable_event_tracking() };
    }
    let producer = ctx.new_stream()?;
    let consumer = ctx.new_stream()?;
    let module = ctx.load_module(Ptx::from_src(SCALE_PTX))?;
    let scale = module.load_function("scale")?;

    let n = 1024usize;
    let input: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = producer.clone_htod(&input)?;
    let mut y = producer.alloc_zeros::<f32>(n)?;
    let count = n as i32;
    for _ in 0..launches {
        // cudarc orders `consumer` after the producer's copy into `x` with an event.
        let mut launch = consumer.launch_builder(&scale);
        launch.arg(&mut y).arg(&x).arg(&count);
        unsafe { launch.launch(LaunchConfig::for_num_elems(n as u32)) }?;
    }
    let out = producer.clone_dtoh(&y)?;
    producer.synchronize()?;
    if racy {
        println!("cudarc-app: {launches} launches on 2 streams, unordered");
    } else {
        println!("cudarc-app: {launches} launches on 2 streams, out[3] = {}", out[3]);
    }
    Ok(())
}
