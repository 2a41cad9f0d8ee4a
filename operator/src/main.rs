fn main() {
    print!("{}", membench::crd_yaml());
}
