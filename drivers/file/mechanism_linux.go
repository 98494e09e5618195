package file

// haveOFD: Linux has open-file-description locks (since 3.15).
const haveOFD = true

// defaultMechanism is the Mechanism of Options that name none; a variable
// so that the tests can run the whole suite with each mechanism.
var defaultMechanism = MechanismOFD
