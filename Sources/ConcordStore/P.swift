import GRDB
public enum P2 {}
