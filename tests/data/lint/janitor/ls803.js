/* purpose-built book for lorescan lint: ls803 */
var APPLY_LIMIT = 6;
var dynamicLore = [
  { keywords: ['harbor', 'pier*'], priority: 4, scenario: 'The harbor.', triggers: ['gull'] },
  { keywords: ['old  road', 'road'], scenario: 'The road.' },
  { tag: 'gull', scenario: 'Gulls wheel overhead.' },
];
