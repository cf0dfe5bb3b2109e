package bench

func sluiceMemoryContenders() []contenderSpec { return nil }
