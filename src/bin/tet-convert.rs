fn main() -> std::process::ExitCode {
    tet_cli::cli::main_convert()
}
