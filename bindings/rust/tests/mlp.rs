// examples/mlp through the bindings: loaded from files and from memory, run, compared with
// the values of tests/c_api/test_c_api.c; then the error cases, each with its code and
// message. GEXEC_SOURCE_DIR names gexec's source tree, GEXEC_TEST_KERNELS the kernel
// library (libgexec_test_kernels.so).
use gexec::{errc, DataType, Error, Executor, Model, Runtime};
use std::path::PathBuf;

const X: [f32; 4] = [0.5, -1.0, 2.0, 0.25];
const EXPECTED: [f32; 3] = [0.400786, 0.336452, 0.262762];

fn env_path(name: &str) -> PathBuf {
    match std::env::var_os(name) {
        Some(v) => PathBuf::from(v),
        None => panic!("set {} (bindings/rust/run_test.sh does)", name),
    }
}

fn mlp() -> PathBuf {
    env_path("GEXEC_SOURCE_DIR").join("examples/mlp")
}

fn kernels() -> PathBuf {
    env_path("GEXEC_TEST_KERNELS")
}

fn load() -> Model {
    let dir = mlp();
    Model::load_files(
        None,
        dir.join("graph.json"),
        kernels(),
        Some(&dir.join("params.bin")),
    )
    .unwrap()
}

fn assert_expected(y: &[f32]) {
    assert_eq!(y.len(), 3);
    for i in 0..3 {
        assert!(
            (y[i] - EXPECTED[i]).abs() < 2e-6,
            "output {:?}, expected {:?}",
            y,
            EXPECTED
        );
    }
}

fn run_x(ex: &mut Executor) -> Vec<f32> {
    let x = ex.input_index("x").unwrap().expect("input x");
    ex.set_input(x, &X, &[1, 4]).unwrap();
    ex.run().unwrap();
    ex.output::<f32>(0).unwrap()
}

fn expect_error<T: std::fmt::Debug>(r: Result<T, Error>, code: i32, needle: &str) {
    match r {
        Ok(v) => panic!(
            "succeeded with {:?}, expected code {} and \"{}\"",
            v, code, needle
        ),
        Err(e) => {
            assert_eq!(e.code(), code, "{}", e);
            assert!(
                e.message().contains(needle),
                "message \"{}\" lacks \"{}\"",
                e.message(),
                needle
            );
            println!("  ok: {}", e);
        }
    }
}

#[test]
fn version() {
    let v = gexec::version();
    assert_eq!(v.split('.').count(), 3, "{}", v);
}

#[test]
fn files_with_runtime() {
    let dir = mlp();
    let rt = Runtime::new(2).unwrap();
    let model = Model::load_files(
        Some(&rt),
        dir.join("graph.json"),
        kernels(),
        Some(&dir.join("params.bin")),
    )
    .unwrap();
    drop(rt); // the model keeps the runtime alive
    assert_eq!(model.param_bytes().unwrap(), (8 * 4 + 3 * 8) * 4);
    let mut ex = model.executor().unwrap();
    assert_eq!(ex.num_inputs().unwrap(), 3);
    assert_eq!(ex.num_outputs().unwrap(), 1);
    assert_eq!(ex.input_name(1).unwrap(), "w1");
    let out_name = ex.output_name(0).unwrap();
    assert_eq!(ex.output_index(&out_name).unwrap(), Some(0));
    assert_eq!(ex.input_index("nope").unwrap(), None);
    let w1 = ex.input_info(1).unwrap();
    assert_eq!(w1.dtype, DataType::FLOAT32);
    assert_eq!(w1.shape, vec![8, 4]);
    let y = ex.output_info(0).unwrap();
    assert_eq!(
        (y.dtype, y.shape.clone(), y.num_elements()),
        (DataType::FLOAT32, vec![1, 3], 3)
    );

    let y = run_x(&mut ex);
    assert_expected(&y);
    let mut copied = [0f32; 3];
    ex.copy_output(0, &mut copied).unwrap();
    assert_eq!(copied.to_vec(), y);
    let (view, shape) = ex.output_view::<f32>(0).unwrap();
    assert_eq!(shape, vec![1, 3]);
    assert_eq!(view, &y[..]);
    println!("  output: {:?}", y);
    drop(model); // the executor keeps the model alive
    assert_expected(&run_x(&mut ex));
}

#[test]
fn zero_copy() {
    #[repr(align(64))]
    struct Aligned([f32; 16]);
    let mut buf = Aligned([0.0; 16]);
    buf.0[..4].copy_from_slice(&X);
    let model = load();
    let mut ex = model.executor().unwrap();
    unsafe { ex.set_input_zero_copy(0, &buf.0[..4], &[1, 4]).unwrap() };
    ex.run().unwrap();
    assert_expected(&ex.output::<f32>(0).unwrap());
}

#[test]
fn memory_then_params() {
    let dir = mlp();
    let graph = std::fs::read(dir.join("graph.json")).unwrap();
    let params = std::fs::read(dir.join("params.bin")).unwrap();
    let bare = Model::load_memory(None, &graph, &[], kernels()).unwrap();
    let mut ex = bare.executor().unwrap();
    drop(bare);
    ex.load_params(&params).unwrap();
    ex.load_params_file(dir.join("params.bin")).unwrap();
    assert_expected(&run_x(&mut ex));

    let with_params = Model::load_memory(None, &graph, &params, kernels()).unwrap();
    assert_expected(&run_x(&mut with_params.executor().unwrap()));
}

#[test]
fn executors_on_threads() {
    let model = load();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let mut ex = model.executor().unwrap();
                for _ in 0..20 {
                    assert_expected(&run_x(&mut ex));
                }
            });
        }
    });
}

#[test]
fn errors() {
    let dir = mlp();
    expect_error(
        Model::load_files(
            None,
            dir.join("graph.json"),
            "/nonexistent/libkernels.so",
            Some(&dir.join("params.bin")),
        ),
        errc::IO,
        "/nonexistent/libkernels.so",
    );
    expect_error(
        Model::load_files(None, "/nonexistent/graph.json", kernels(), None),
        errc::IO,
        "/nonexistent/graph.json",
    );
    expect_error(
        Model::load_memory(None, b"{\"nodes\": [", &[], kernels()),
        errc::INVALID_JSON,
        "",
    );
    expect_error(
        Model::load_memory(None, b"{\"nodes\": 3}", &[], kernels()),
        errc::INVALID_GRAPH,
        "nodes",
    );
    let graph = std::fs::read(dir.join("graph.json")).unwrap();
    expect_error(
        Model::load_memory(None, &graph, b"garbage", kernels()),
        errc::INVALID_PARAMS,
        "",
    );

    let model = load();
    let mut ex = model.executor().unwrap();
    // the C library refuses a dtype or a shape other than the input's
    expect_error(
        ex.set_input(0, &[0i32; 4], &[1, 4]),
        errc::DTYPE_MISMATCH,
        "\"x\"",
    );
    expect_error(
        ex.set_input(0, &[0f32; 5], &[1, 5]),
        errc::SHAPE_MISMATCH,
        "\"x\"",
    );
    expect_error(
        ex.set_input(7, &[0f32; 4], &[1, 4]),
        errc::INVALID_ARGUMENT,
        "input",
    );
    // the binding refuses a slice that does not fill its shape
    expect_error(
        ex.set_input(0, &[0f32; 3], &[1, 4]),
        errc::INVALID_ARGUMENT,
        "do not fill",
    );
    // an unset input: run refuses it, naming it
    expect_error(ex.run(), errc::INVALID_ARGUMENT, "\"x\"");
    ex.set_input(0, &X, &[1, 4]).unwrap();
    ex.run().unwrap();
    let mut small = [0f32; 2];
    expect_error(
        ex.copy_output(0, &mut small),
        errc::INVALID_ARGUMENT,
        "too small",
    );
    let mut ints = [0i32; 3];
    expect_error(
        ex.copy_output(0, &mut ints),
        errc::DTYPE_MISMATCH,
        "float32",
    );
    expect_error(ex.output::<f64>(0), errc::DTYPE_MISMATCH, "float32");
    expect_error(
        ex.output_view::<i64>(0).map(|(v, _)| v.len()),
        errc::DTYPE_MISMATCH,
        "float32",
    );
    expect_error(ex.output_info(1), errc::INVALID_ARGUMENT, "output index 1");
    expect_error(ex.load_params(b"garbage"), errc::INVALID_PARAMS, "");
    // a failed load left the parameters
    assert_expected(&ex.output::<f32>(0).unwrap());
    ex.run().unwrap();
    assert_expected(&ex.output::<f32>(0).unwrap());

    let e = Model::load_files(None, "/nonexistent/graph.json", kernels(), None)
        .err()
        .unwrap();
    assert!(e.to_string().starts_with("gexec error 14: "), "{}", e);
    let boxed: Box<dyn std::error::Error> = Box::new(e);
    assert!(boxed.to_string().contains("/nonexistent/graph.json"));
}
