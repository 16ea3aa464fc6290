package measurelimit

// MaxPoints is the most message sizes (points) one stored measurement
// holds.
const MaxPoints = 256
