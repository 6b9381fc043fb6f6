extension Duration {
    /// The duration in seconds, with its fraction: for measurements and for timeouts' messages.
    package var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
