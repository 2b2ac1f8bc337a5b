#[test]
fn t() {
    let exe = std::env::current_exe().unwrap();
    println!("{}", exe.display());
}
