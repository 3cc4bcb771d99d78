// TVM-compiled conformance models through the binding, compared with TVM's own outputs bit
// for bit: GEXEC_CONFORMANCE_DIR (the test command's build/conformance, made by TVM) holds,
// per model, the single-file library model.so, TVM's inputs.bin and outputs.bin (TVM's
// parameter format: the inputs by name, the outputs named by their index). Models whose
// files are not there are reported and left out; with no GEXEC_CONFORMANCE_DIR the test
// says so and passes (the binding's other tests still run).
use gexec::Model;
use std::collections::HashMap;
use std::path::Path;

/// The float32 tensors of a TVM parameter blob by name: (shape, data), read as TVM's
/// save_param_dict writes them (little-endian).
fn read_blob(path: &Path) -> HashMap<String, (Vec<i64>, Vec<f32>)> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {}", path.display(), e));
    let mut at = 0usize;
    let mut u64_at = |at: &mut usize| {
        let v = u64::from_le_bytes(b[*at..*at + 8].try_into().unwrap());
        *at += 8;
        v
    };
    assert_eq!(u64_at(&mut at), 0xF7E5_8D4F_0504_9CB7, "{}: not a TVM parameter blob", path.display());
    u64_at(&mut at); // reserved
    let names: Vec<String> = (0..u64_at(&mut at))
        .map(|_| {
            let n = u64_at(&mut at) as usize;
            at += n;
            String::from_utf8(b[at - n..at].to_vec()).unwrap()
        })
        .collect();
    assert_eq!(u64_at(&mut at) as usize, names.len());
    let mut out = HashMap::new();
    for name in names {
        assert_eq!(u64_at(&mut at), 0xDD5E_40F0_96B4_A13F, "{}: tensor \"{}\"", path.display(), name);
        u64_at(&mut at); // reserved
        at += 8; // device
        let ndim = i32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        let (code, bits) = (b[at + 4], b[at + 5]);
        at += 8;
        let shape: Vec<i64> = (0..ndim).map(|_| u64_at(&mut at) as i64).collect();
        let bytes = u64_at(&mut at) as usize;
        assert_eq!((code, bits), (2, 32), "{}: tensor \"{}\" is not float32", path.display(), name);
        let data = b[at..at + bytes].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        at += bytes;
        out.insert(name, (shape, data));
    }
    out
}

#[test]
fn conformance_models_bit_for_bit() {
    let dir = match std::env::var_os("GEXEC_CONFORMANCE_DIR") {
        Some(d) => std::path::PathBuf::from(d),
        None => {
            println!("SKIPPED: GEXEC_CONFORMANCE_DIR is not set (the test command sets it to the TVM-compiled models)");
            return;
        }
    };
    let mut compared = 0;
    for model in ["mlp", "resnet", "mobilenet"] {
        let d = dir.join(model);
        if !d.join("model.so").exists() || !d.join("outputs.bin").exists() {
            println!("{}: no TVM-compiled files in {}, left out", model, d.display());
            continue;
        }
        let m = Model::load_library(None, d.join("model.so")).unwrap();
        let mut ex = m.executor().unwrap();
        for (name, (shape, data)) in read_blob(&d.join("inputs.bin")) {
            let index = ex.input_index(&name).unwrap().unwrap_or_else(|| panic!("{}: no input \"{}\"", model, name));
            ex.set_input(index, &data, &shape).unwrap();
        }
        ex.run().unwrap();
        let expected = read_blob(&d.join("outputs.bin"));
        assert_eq!(ex.num_outputs().unwrap(), expected.len(), "{}", model);
        for (name, (shape, want)) in &expected {
            let i: usize = name.parse().unwrap();
            assert_eq!(&ex.output_info(i).unwrap().shape, shape, "{} output {}", model, i);
            let got = ex.output::<f32>(i).unwrap();
            let same = got.len() == want.len() && got.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{} output {}: differs from TVM's", model, i);
        }
        println!("{}: {} output(s) bit for bit as TVM's", model, expected.len());
        compared += 1;
    }
    println!("{} TVM-compiled model(s) compared", compared);
}
