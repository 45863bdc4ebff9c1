//! `scripts/sandbox-link`, the link driver of the sandbox build (`scripts/build-sandbox`): the
//! layout's symbols are matched to the objects' own, whatever `.llvm.` suffix each carries now.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root")
}

/// An object file defining functions with these symbol names (written as assembly labels).
fn object(dir: &Path, symbols: &[&str]) -> PathBuf {
    let source = dir.join("f.c");
    let body: String = symbols
        .iter()
        .enumerate()
        .map(|(i, name)| format!("int f{i}(void) __asm__(\"{name}\");\nint f{i}(void) {{ return {i}; }}\n"))
        .collect();
    std::fs::write(&source, body).unwrap();
    let object = dir.join("f.o");
    let status = Command::new("cc").arg("-c").arg(&source).arg("-o").arg(&object).status().expect("run cc");
    assert!(status.success(), "cc failed");
    object
}

#[test]
fn the_layout_is_resolved_against_the_symbols_of_the_objects_linked() {
    let dir = tempfile::tempdir().unwrap();
    let object = object(
        dir.path(),
        &["kept_as_is", "moved.llvm.222", "twice.llvm.333", "twice.llvm.444", "unlisted", "plain.llvm.555"],
    );
    let layout = dir.path().join("layout.txt");
    // As recorded from an older build: other suffixes, a function since removed, one listed twice.
    std::fs::write(&layout, "moved.llvm.111\nkept_as_is\ngone.llvm.9\ntwice.llvm.1\nplain\nkept_as_is\n").unwrap();
    // Stands in for `cc`: keeps the ordering file it is given and the other arguments.
    let seen = dir.path().join("seen");
    let cc = dir.path().join("cc");
    std::fs::write(
        &cc,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in -Wl,--symbol-ordering-file=*) cp \"${{a#*=}}\" {seen}/order ;; *) echo \"$a\" >>{seen}/args ;; esac; done\n",
            seen = seen.display()
        ),
    )
    .unwrap();
    std::fs::create_dir(&seen).unwrap();
    std::fs::set_permissions(&cc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let status = Command::new(root().join("scripts/sandbox-link"))
        .env("MNEMO_SANDBOX_CC", &cc)
        .arg("-o")
        .arg(dir.path().join("out"))
        .arg(&object)
        .arg(format!("-Wl,--symbol-ordering-file={}", layout.display()))
        .arg("-Wl,--no-warn-symbol-ordering")
        .status()
        .expect("run scripts/sandbox-link");
    assert!(status.success());
    let order = std::fs::read_to_string(seen.join("order")).expect("the driver passed an ordering file");
    assert_eq!(
        order.lines().collect::<Vec<_>>(),
        ["moved.llvm.222", "kept_as_is", "twice.llvm.333", "twice.llvm.444", "plain.llvm.555"],
        "in the layout's order, each once, under the objects' suffixes (a name two symbols share \
         brings both); what is gone is left out, what the layout does not list is not added"
    );
    let args = std::fs::read_to_string(seen.join("args")).unwrap();
    let expected =
        format!("-o\n{}\n{}\n-Wl,--no-warn-symbol-ordering\n", dir.path().join("out").display(), object.display());
    assert_eq!(args, expected, "every other argument is passed on as it was");
}
