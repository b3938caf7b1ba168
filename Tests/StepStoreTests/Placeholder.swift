import Testing

@Test func placeholder() { #expect(1 == 1) }
