// Runs gexec's bundled MLP (examples/mlp) from Rust:
//   cargo run --example mlp -- <gexec source dir> <libgexec_test_kernels.so>
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        return Err("usage: mlp <gexec source dir> <kernel library>".into());
    }
    let dir = Path::new(&args[1]).join("examples/mlp");
    println!("gexec {}", gexec::version());

    // The model: graph, kernels and parameters; None is the process's default runtime.
    let model = gexec::Model::load_files(
        None,
        dir.join("graph.json"),
        &args[2],
        Some(&dir.join("params.bin")),
    )?;
    let mut ex = model.executor()?; // one per thread; many per model

    let x = ex.input_index("x")?.ok_or("the model has no input x")?;
    ex.set_input(x, &[0.5f32, -1.0, 2.0, 0.25], &[1, 4])?;
    ex.run()?;

    let info = ex.output_info(0)?;
    let y: Vec<f32> = ex.output(0)?; // a copy; output_view borrows it instead
    println!(
        "{} {} {:?}: {:?}",
        ex.output_name(0)?,
        info.dtype,
        info.shape,
        y
    );

    // Errors carry the C status's code and message.
    match ex.set_input(x, &[1i32, 2, 3, 4], &[1, 4]) {
        Err(e) if e.code() == gexec::errc::DTYPE_MISMATCH => println!("refused: {}", e),
        other => println!("unexpected: {:?}", other),
    }
    Ok(()) // the executor and the model are released when dropped
}
