"""What the host and the device under test are: probes, images, the cache, doctor checks,
git and host facts."""
