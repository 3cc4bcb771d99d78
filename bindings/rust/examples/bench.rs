// The Rust binding's cost per run(): examples/mlp run through Executor::run() (one call
// into the C API's executor_run), and a whole step with slices (set_input, run,
// copy_output); best ns per call over batches, as benchmarks/c_api does for C and
// bindings/java/bench for Java. benchmarks/c_api/bindings.sh runs all of them in turn.
//   cargo run --release --example bench -- <gexec source dir> <libgexec_test_kernels.so> [repeats]
use std::path::Path;
use std::time::Instant;

fn best_ns(mut f: impl FnMut(), repeats: usize, number: usize) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..repeats {
        let start = Instant::now();
        for _ in 0..number {
            f();
        }
        best = best.min(start.elapsed().as_nanos() as f64 / number as f64);
    }
    best
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err("usage: bench <gexec source dir> <kernel library> [repeats]".into());
    }
    let repeats: usize = args.get(3).map(|r| r.parse()).transpose()?.unwrap_or(200);
    let number = 2000;
    let dir = Path::new(&args[1]).join("examples/mlp");
    let model = gexec::Model::load_files(None, dir.join("graph.json"), &args[2], Some(&dir.join("params.bin")))?;
    let mut ex = model.executor()?;
    let x = [0.5f32, -1.0, 2.0, 0.25];
    let mut y = [0f32; 3];
    ex.set_input(0, &x, &[1, 4])?;
    for _ in 0..20000 {
        ex.run()?;
    }
    let mut run_ns = f64::MAX;
    let mut step_ns = f64::MAX;
    for _ in 0..5 {
        run_ns = run_ns.min(best_ns(|| ex.run().unwrap(), repeats / 5 + 1, number));
        step_ns = step_ns.min(best_ns(
            || {
                ex.set_input(0, &x, &[1, 4]).unwrap();
                ex.run().unwrap();
                ex.copy_output(0, &mut y).unwrap();
            },
            repeats / 5 + 1,
            number,
        ));
    }
    println!("Rust, examples/mlp, best ns per call over {} x {} calls each", repeats, number);
    println!("  Executor::run():                                {:8.1} ns", run_ns);
    println!("  set_input(&[f32]) + run() + copy_output(&mut):  {:8.1} ns", step_ns);
    Ok(())
}
