fn main() -> std::process::ExitCode {
    tet::cli::main_convert()
}
